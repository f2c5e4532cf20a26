/**
 * Reading the element's `policy` attribute: a URL to fetch, or YAML written in the attribute.
 * DOM-free.
 *
 * @module
 */

/** A `policy` attribute that is a URL rather than YAML: one line, starting like a URL or a path. */
export function isPolicyUrl(value: string): boolean {
  return !/[\r\n]/.test(value.trim()) && /^(https?:\/\/|\/|\.\.?\/)\S*$/.test(value.trim());
}

/**
 * YAML written inside an HTML attribute, indented with the markup: a leading blank line is
 * dropped and the common indentation of the lines after the first is removed (the first line
 * sits right after the quote).
 */
export function dedentAttribute(value: string): string {
  const lines = value.replace(/^[ \t]*\r?\n/, '').split(/\r?\n/);
  const rest = lines.slice(1).filter((l) => l.trim() !== '');
  const firstIndented = /^[ \t]/.test(lines[0] ?? '');
  const pool = firstIndented ? lines.filter((l) => l.trim() !== '') : rest;
  const indent = pool.length ? Math.min(...pool.map((l) => /^[ \t]*/.exec(l)![0].length)) : 0;
  return lines
    .map((l, i) => (i === 0 && !firstIndented ? l : l.slice(Math.min(indent, /^[ \t]*/.exec(l)![0].length))))
    .join('\n')
    .replace(/\s*$/, '\n');
}
