/**
 * What `ctrlrun scan` looks for: the catalogue of consequential calls in the libraries JS agents
 * use (each entry says why it is listed), the verb vocabulary for everything else (docs/spec/04-surfaces.md §7),
 * and the wrappers whose argument counts as protected. `ctrlrun.scan.yaml` (or `--catalogue
 * FILE`) adds entries and wrappers; `--vocabulary FILE` replaces the verb list.
 *
 * @module
 */
import { isMap, isNode, isScalar, LineCounter, parseDocument, visit } from 'yaml';
import { CliRefusal } from '../errors.js';
import { readFileWithin, readRegularFile, UnreadableFile } from '../files.js';

/** What an argument must look like for a catalogued call to be consequential. */
export interface CatalogueCondition {
  /** Argument index holding SQL: consequential when it writes (INSERT, UPDATE, DELETE, DROP…). */
  readonly sql?: number;
  /** Argument index holding request options: consequential when `method` is not GET/HEAD/OPTIONS. */
  readonly method?: number;
  /** The first argument is `new X(…)` and X's name matches this regular expression (AWS SDK v3 commands). */
  readonly command?: string;
}

/** One catalogued call. */
export interface CatalogueEntry {
  /** Stable id; the finding's rule is `catalogue:<id>`. */
  readonly id: string;
  /** The module the call comes from: an import specifier, `*` matching within one name (`@aws-sdk/client-*`). `node:` is ignored. `<global>` is a global (fetch). */
  readonly module: string;
  /** The member path from the import, dotted: `**` matches any number of names, `*` within one name, `{a,b}` alternatives. */
  readonly call: string;
  /** Why it is listed: what it does that cannot be undone. */
  readonly why: string;
  /** Suggested action name for the policy entry. */
  readonly action: string;
  /** Suggested `effect:` template (one effect per this key). */
  readonly effect: string;
  readonly when?: CatalogueCondition;
}

/** A function whose argument (a function, a tool, or a name bound to one) is protected. */
export interface Wrapper {
  readonly module: string;
  readonly name: string;
}

/**
 * The 25 verbs that mark a call as one that changes something (docs/spec/04-surfaces.md §7).
 * `execute` is not one: it names no effect of its own.
 */
export const VOCABULARY: readonly string[] = [
  'approve',
  'cancel',
  'charge',
  'delete',
  'deploy',
  'destroy',
  'disable',
  'drop',
  'grant',
  'issue',
  'merge',
  'pay',
  'payout',
  'publish',
  'purchase',
  'push',
  'refund',
  'remove',
  'revoke',
  'rotate',
  'send',
  'submit',
  'terminate',
  'transfer',
  'truncate',
];

/** `protect` from the kernel and the adapters' wrappers. */
export const WRAPPERS: readonly Wrapper[] = [
  { module: '@ctrlrun/kernel', name: 'protect' },
  ...['@ctrlrun/ai-sdk', '@ctrlrun/openai-agents'].flatMap((module) => [
    { module, name: 'protectTool' },
    { module, name: 'protectTools' },
  ]),
  { module: '@ctrlrun/langgraph', name: 'protectInGraph' },
];

const AWS_WRITE =
  '^(Delete|Terminate|Put|Create|Update|Remove|Stop|Reboot|Detach|Revoke|Disable|Modify|Publish|Send|Invoke|Copy|Restore|Attach|Authorize|Run|Start|Purge|Cancel|Batch(Delete|Write)|Transact(Write)?)\\w*Command$';
const SQL_WRITERS = (module: string, id: string, lib: string, extra = ''): CatalogueEntry => ({
  id,
  module,
  call: `**.{query,execute,exec,none,any,many,one,oneOrNone,result${extra}}`,
  when: { sql: 0 },
  why: `${lib} runs this SQL as written: an INSERT, UPDATE, DELETE, DROP or TRUNCATE changes data that a retry changes again`,
  action: 'db.write',
  effect: 'db:{table}:{id}',
});

/** The built-in catalogue. */
export const CATALOGUE: readonly CatalogueEntry[] = [
  // Payments.
  {
    id: 'stripe.refund',
    module: 'stripe',
    call: '**.refunds.create',
    why: 'moves money back to a customer; a retry after a lost reply refunds twice',
    action: 'stripe.refund',
    effect: 'refund:{payment_intent}',
  },
  {
    id: 'stripe.charge',
    module: 'stripe',
    call: '**.{charges.create,paymentIntents.create,paymentIntents.confirm,paymentIntents.capture}',
    why: "takes money from a customer's card",
    action: 'stripe.charge',
    effect: 'charge:{idempotency_key}',
  },
  {
    id: 'stripe.transfer',
    module: 'stripe',
    call: '**.{transfers.create,payouts.create,topups.create}',
    why: 'moves money out of the platform balance',
    action: 'stripe.transfer',
    effect: 'transfer:{idempotency_key}',
  },
  {
    id: 'stripe.cancel',
    module: 'stripe',
    call: '**.{subscriptions.cancel,subscriptions.del,paymentIntents.cancel,invoices.voidInvoice,customers.del}',
    why: 'cancels or deletes a billing object; not reversible through the API',
    action: 'stripe.cancel',
    effect: 'stripe:{id}',
  },
  {
    id: 'stripe.invoice',
    module: 'stripe',
    call: '**.{invoices.pay,invoices.finalizeInvoice,invoices.sendInvoice}',
    why: 'charges or sends an invoice to a customer',
    action: 'stripe.invoice',
    effect: 'invoice:{id}',
  },
  // Cloud.
  {
    id: 'aws.command',
    module: '@aws-sdk/client-*',
    call: '**.send',
    when: { command: AWS_WRITE },
    why: 'an AWS SDK v3 command that deletes, terminates, writes or starts something in the account',
    action: 'aws.command',
    effect: 'aws:{resource}',
  },
  {
    id: 'aws.method',
    module: '@aws-sdk/client-*',
    call: '**.{delete*,terminate*,put*,create*,update*,remove*,stop*,reboot*,detach*,revoke*,disable*,modify*,publish*,sendEmail,sendRawEmail,sendTemplatedEmail,sendMessage,sendMessageBatch,invoke*,copy*,run*,start*,purge*,batchDelete*,batchWrite*,transactWrite*}',
    why: 'an AWS SDK v3 aggregated-client method that deletes, terminates, writes or starts something in the account',
    action: 'aws.command',
    effect: 'aws:{resource}',
  },
  {
    id: 'k8s.write',
    module: '@kubernetes/client-node',
    call: '**.{delete*,patch*,replace*,create*}',
    why: 'creates, changes or deletes objects in a Kubernetes cluster (a namespace delete takes everything in it)',
    action: 'k8s.delete_namespace',
    effect: 'namespace:{cluster}:{name}',
  },
  // Source control.
  {
    id: 'github.merge',
    module: '{@octokit/*,octokit}',
    call: '**.{pulls.merge,repos.merge,pulls.updateBranch}',
    why: 'merges into a branch others build and deploy from',
    action: 'github.merge',
    effect: 'merge:{owner}/{repo}#{pull_number}',
  },
  {
    id: 'github.delete',
    module: '{@octokit/*,octokit}',
    call: '**.{repos.delete,repos.deleteFile,git.deleteRef,repos.deleteRelease,repos.deleteBranchProtection,issues.deleteComment}',
    why: 'deletes a repository, branch, file or release',
    action: 'github.delete',
    effect: 'github:{owner}/{repo}:{ref}',
  },
  {
    id: 'github.write',
    module: '{@octokit/*,octokit}',
    call: '**.{git.updateRef,repos.createOrUpdateFileContents,repos.createRelease,actions.createWorkflowDispatch,repos.update}',
    why: 'writes to a repository or starts a workflow (a deploy)',
    action: 'github.write',
    effect: 'github:{owner}/{repo}:{ref}',
  },
  // Databases.
  SQL_WRITERS('pg', 'pg.write', 'pg'),
  SQL_WRITERS('{mysql2,mysql2/*,mysql}', 'mysql.write', 'mysql2', ',prepare'),
  SQL_WRITERS('better-sqlite3', 'sqlite.write', 'better-sqlite3', ',prepare'),
  SQL_WRITERS('sqlite3', 'sqlite3.write', 'sqlite3', ',prepare,run,all,get,each'),
  {
    id: 'prisma.write',
    module: '{@prisma/client,@prisma/client/*}',
    call: '**.{create,createMany,createManyAndReturn,update,updateMany,upsert,delete,deleteMany,$executeRaw,$executeRawUnsafe}',
    why: 'Prisma writes or deletes rows',
    action: 'db.write',
    effect: 'db:{model}:{id}',
  },
  {
    id: 'drizzle.write',
    module: '{drizzle-orm,drizzle-orm/*}',
    call: '**.{insert,update,delete}',
    why: 'Drizzle inserts, updates or deletes rows',
    action: 'db.write',
    effect: 'db:{table}:{id}',
  },
  // The machine.
  {
    id: 'child_process',
    module: 'child_process',
    call: '**.{exec,execSync,execFile,execFileSync,spawn,spawnSync,fork}',
    why: 'runs a program with the agent’s privileges; what it does is not visible here',
    action: 'shell.run',
    effect: 'shell:{command}',
  },
  {
    id: 'fs.write',
    module: '{fs,fs/promises}',
    call: '**.{writeFile,writeFileSync,appendFile,appendFileSync,createWriteStream,copyFile,copyFileSync,cp,cpSync,rename,renameSync,truncate,truncateSync,ftruncate,ftruncateSync,chmod,chmodSync,chown,chownSync,symlink,symlinkSync}',
    why: 'overwrites, moves or changes files on disk',
    action: 'fs.write',
    effect: 'file:{path}',
  },
  {
    id: 'fs.delete',
    module: '{fs,fs/promises}',
    call: '**.{rm,rmSync,rmdir,rmdirSync,unlink,unlinkSync}',
    why: 'deletes files or directories on disk; there is no undo',
    action: 'fs.delete',
    effect: 'file:{path}',
  },
  // The network.
  {
    id: 'fetch.write',
    module: '{<global>,undici,node-fetch}',
    call: 'fetch',
    when: { method: 1 },
    why: 'an HTTP request with a non-GET method changes something on another service',
    action: 'http.write',
    effect: 'http:{url}',
  },
  {
    id: 'axios.write',
    module: 'axios',
    call: '**.{post,put,patch,delete}',
    why: 'an HTTP request with a non-GET method changes something on another service',
    action: 'http.write',
    effect: 'http:{url}',
  },
  {
    id: 'mcp.callTool',
    module: '@modelcontextprotocol/sdk*',
    call: '**.callTool',
    why: 'calls a tool on an MCP server: whatever the tool does happens there, outside this code',
    action: 'mcp.call_tool',
    effect: 'mcp:{name}:{id}',
  },
];

/** The schema tag of a catalogue file. */
export const CATALOGUE_SCHEMA = 'ctrlrun.scan-catalogue/v1';

/** What a catalogue file adds. */
export interface CatalogueFile {
  readonly entries: readonly CatalogueEntry[];
  readonly wrappers: readonly Wrapper[];
  /** The URLs `ctrlrun gateway` listens on: an MCP client connected only to these is covered. */
  readonly gateways: readonly string[];
}

/** A URL as compared with a gateway's: origin and path, without a trailing `/`; null when not an http(s) URL. */
export function gatewayKey(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
}

const ENTRY_KEYS = new Set(['id', 'module', 'call', 'why', 'action', 'effect', 'when']);
const WHEN_KEYS = new Set(['sql', 'method', 'command']);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** How a file scan was given may be read: inside `within` only (a file of the scanned tree), or anywhere (null: the operator named it). */
function readScanFile(path: string, within: string | null, what: string): string {
  try {
    return within === null ? readRegularFile(path) : readFileWithin(path, within);
  } catch (e) {
    if (e instanceof UnreadableFile) throw new CliRefusal(`${what} ${path} cannot be read: ${e.message}`, 2);
    throw e;
  }
}

/**
 * Reads a catalogue file: `schema: ctrlrun.scan-catalogue/v1`, `catalogue:` (a list of entries:
 * `id`, `module`, `call`, `why` required; `action`, `effect`, `when` optional), `wrappers:` (a
 * list of `{module, name}`) and `gateways:` (the URLs `ctrlrun gateway` listens on). Anything
 * else is refused, naming where (exit 2). Read through the regular-file reader; when `within` is
 * given, a file whose links lead out of that directory is refused unread.
 */
export function loadCatalogueFile(path: string, within: string | null = null): CatalogueFile {
  return parseCatalogue(readScanFile(path, within, 'the scan catalogue'), path);
}

/**
 * A catalogue file's text as {@link loadCatalogueFile} reads it; `name` names it in refusals. A
 * refusal says where (the key path, the line and column) and never quotes the text: the file may
 * be a tree's, shown in a log someone else reads.
 */
export function parseCatalogue(text: string, name: string): CatalogueFile {
  const lines = new LineCounter();
  const at = (offset: number | undefined): string => {
    if (offset === undefined) return '';
    const p = lines.linePos(offset);
    return ` (line ${p.line}, column ${p.col})`;
  };
  const bad = (where: string, what: string, offset?: number) => new CliRefusal(`the scan catalogue ${name}: ${where}${at(offset)}: ${what}`, 2);
  // prettyErrors off: the yaml package's own message quotes the source line; only its code is shown.
  const parsed = parseDocument(text, { uniqueKeys: true, lineCounter: lines, prettyErrors: false });
  const first = parsed.errors[0];
  if (first !== undefined) throw bad('document', `not YAML (${first.code.toLowerCase().replace(/_/g, ' ')})`, first.pos[0]);
  // An alias without its anchor: found here, where its place is known (toJS's own error quotes its name).
  let badAlias: number | null = null;
  visit(parsed, {
    Alias(_, node) {
      if (node.resolve(parsed) !== undefined) return undefined;
      badAlias = node.range?.[0] ?? 0;
      return visit.BREAK;
    },
  });
  if (badAlias !== null) throw bad('document', 'not YAML (an alias names no anchor before it)', badAlias);
  let doc: unknown;
  try {
    doc = parsed.toJS({ maxAliasCount: 100 });
  } catch {
    throw bad('document', 'not YAML that can be read (its aliases expand too far)');
  }
  /** Where the node at `keys` starts, or where its key `key` does. */
  const offsetOf = (keys: readonly (string | number)[], key?: string): number | undefined => {
    const node = keys.length === 0 ? parsed.contents : parsed.getIn(keys, true);
    if (key === undefined) return isNode(node) ? node.range?.[0] : undefined;
    if (!isMap(node)) return undefined;
    const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === key);
    return isNode(pair?.key) ? pair.key.range?.[0] : undefined;
  };
  const unknownKey = (where: string, keys: readonly (string | number)[], key: string, known: string) =>
    bad(where, `an unknown key; the keys are ${known}`, offsetOf(keys, key));
  if (!isRecord(doc)) throw bad('document', 'must be a mapping with schema and catalogue or wrappers');
  for (const k of Object.keys(doc))
    if (!['schema', 'catalogue', 'wrappers', 'gateways'].includes(k)) throw unknownKey('document', [], k, 'schema, catalogue, wrappers, gateways');
  if (doc['schema'] !== CATALOGUE_SCHEMA) throw bad('schema', `must be ${CATALOGUE_SCHEMA}`, offsetOf(['schema']));
  const str = (v: unknown, where: string, keys: readonly (string | number)[], required: boolean): string | undefined => {
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'string' || v.trim() === '') throw bad(where, 'must be a non-empty string', offsetOf(keys));
    return v;
  };
  const list = (key: string): unknown[] => {
    const v = doc[key];
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw bad(key, 'must be a list', offsetOf([key]));
    return v;
  };
  const entries = list('catalogue').map((e, i): CatalogueEntry => {
    const where = `catalogue[${i}]`;
    const keys = ['catalogue', i];
    if (!isRecord(e)) throw bad(where, 'must be a mapping', offsetOf(keys));
    for (const k of Object.keys(e)) if (!ENTRY_KEYS.has(k)) throw unknownKey(where, keys, k, [...ENTRY_KEYS].join(', '));
    const field = (k: string, required: boolean) => str(e[k], `${where}.${k}`, [...keys, k], required);
    const id = field('id', true)!;
    let when: CatalogueCondition | undefined;
    if (e['when'] !== undefined) {
      const w = e['when'];
      const whenKeys = [...keys, 'when'];
      if (!isRecord(w)) throw bad(`${where}.when`, 'must be a mapping', offsetOf(whenKeys));
      const out: { sql?: number; method?: number; command?: string } = {};
      for (const [k, v] of Object.entries(w)) {
        if (!WHEN_KEYS.has(k)) throw unknownKey(`${where}.when`, whenKeys, k, 'sql, method, command');
        if (k === 'command') {
          const pattern = str(v, `${where}.when.command`, [...whenKeys, k], true)!;
          try {
            new RegExp(pattern);
          } catch {
            throw bad(`${where}.when.command`, 'must be a regular expression', offsetOf([...whenKeys, k]));
          }
          out.command = pattern;
        } else {
          if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > 20)
            throw bad(`${where}.when.${k}`, 'must be an argument index 0–20', offsetOf([...whenKeys, k]));
          out[k as 'sql' | 'method'] = v;
        }
      }
      when = out;
    }
    const action = field('action', false) ?? id;
    return {
      id,
      module: field('module', true)!,
      call: field('call', true)!,
      why: field('why', true)!,
      action,
      effect: field('effect', false) ?? `${action.split('.').pop()}:{id}`,
      ...(when ? { when } : {}),
    };
  });
  const wrappers = list('wrappers').map((w, i): Wrapper => {
    const where = `wrappers[${i}]`;
    const keys = ['wrappers', i];
    if (!isRecord(w)) throw bad(where, 'must be a mapping with module and name', offsetOf(keys));
    for (const k of Object.keys(w)) if (k !== 'module' && k !== 'name') throw unknownKey(where, keys, k, 'module, name');
    return { module: str(w['module'], `${where}.module`, [...keys, 'module'], true)!, name: str(w['name'], `${where}.name`, [...keys, 'name'], true)! };
  });
  const gateways = list('gateways').map((g, i): string => {
    const url = str(g, `gateways[${i}]`, ['gateways', i], true)!;
    if (gatewayKey(url) === null) throw bad(`gateways[${i}]`, 'must be an http(s) URL', offsetOf(['gateways', i]));
    return url;
  });
  return { entries, wrappers, gateways };
}

/** Reads a vocabulary file (see {@link parseVocabulary}) through the regular-file reader; `within` as {@link loadCatalogueFile} takes it. */
export function loadVocabularyFile(path: string, within: string | null = null): string[] {
  return parseVocabulary(readScanFile(path, within, 'the vocabulary'), path);
}

/**
 * A vocabulary file's text: one verb a line (`#` starts a comment); lowercase ASCII letters and
 * `_`. A refusal names the line, never quotes it.
 */
export function parseVocabulary(text: string, name: string): string[] {
  const verbs: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.replace(/#.*$/, '').trim();
    if (line === '') return;
    if (!/^[a-z][a-z_]*$/.test(line)) throw new CliRefusal(`the vocabulary ${name}: line ${i + 1} is not a verb (lowercase letters and _, one a line)`, 2);
    verbs.push(line);
  });
  if (verbs.length === 0) throw new CliRefusal(`the vocabulary ${name} lists no verb`, 2);
  return verbs;
}

/** A glob over names (`*` within a name, `{a,b}` alternatives) as a regular expression source. */
function nameGlob(glob: string): string {
  let out = '';
  let depth = 0;
  for (const c of glob) {
    if (c === '*') out += '[^.]*';
    else if (c === '{') {
      out += '(?:';
      depth++;
    } else if (c === '}' && depth > 0) {
      out += ')';
      depth--;
    } else if (c === ',' && depth > 0) out += '|';
    else out += c.replace(/[.+?^$()|[\]\\/]/g, '\\$&');
  }
  return out + ')'.repeat(depth);
}

/** Matches a module specifier (without `node:`) against an entry's module glob. */
export function moduleMatcher(glob: string): (module: string) => boolean {
  const re = new RegExp(`^(?:${nameGlob(glob).replace(/\[\^\.\]\*/g, '[^]*')})$`);
  return (m) => re.test(m);
}

/** Matches a dotted member path against a call glob (`**.refunds.create`). */
export function callMatcher(glob: string): (path: readonly string[]) => boolean {
  // `**.` → any number of leading names; names are joined with `.` and never contain one.
  const source = nameGlob(glob).replace(/\[\^\.\]\*\[\^\.\]\*\\\./g, '(?:[^.]*\\.)*');
  const re = new RegExp(`^(?:${source})$`);
  return (path) => re.test(path.join('.'));
}

/** Matches a module the way a catalogue entry, a wrapper or the vocabulary filter need. */
export function normalizeModule(specifier: string): string {
  return specifier.startsWith('node:') ? specifier.slice(5) : specifier;
}

/**
 * The verbs that name a read. A policy action named by one (`customer.read`, `invoices.list`,
 * `get_customer`) and by no verb of the vocabulary is a read: it needs no `effect:` template, and
 * one would do harm — the key is reserved at most once, so the second read of the same record
 * would be refused as `DuplicateEffect`.
 */
export const READ_VERBS: ReadonlySet<string> = new Set([
  'read',
  'get',
  'list',
  'search',
  'find',
  'lookup',
  'view',
  'show',
  'describe',
  'count',
  'inspect',
  'preview',
  'browse',
  'retrieve',
]);

/**
 * Whether a policy action name names a read: its last dotted segment is a read verb, or a
 * compound whose first word is one (`get_customer`, `listInvoices`), and no segment or word
 * matches a verb of `verbs` (`refund.get_and_cancel` is not a read).
 */
export function isReadName(name: string, verbs: ReadonlySet<string>): boolean {
  const segments = name.split('.');
  if (vocabularyVerb(segments, verbs) !== null) return false;
  const first = segments
    .at(-1)!
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[_$-]+/)
    .find((w) => w !== '');
  return first !== undefined && READ_VERBS.has(first);
}

/**
 * The verb a name matches (docs/spec/04-surfaces.md §7): a whole segment matches a verb or its plural; a word of a
 * `_` or camelCase compound only the singular (`create_refund` ✓, `refunds_report` ✗, `deletedAt` ✗).
 */
export function vocabularyVerb(segments: readonly string[], verbs: ReadonlySet<string>): string | null {
  for (const segment of segments) {
    const s = segment.toLowerCase();
    if (verbs.has(s)) return s;
    if (s.endsWith('s') && verbs.has(s.slice(0, -1))) return s.slice(0, -1);
    if (s.endsWith('es') && verbs.has(s.slice(0, -2))) return s.slice(0, -2);
    const words = segment
      .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
      .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
      .toLowerCase()
      .split(/[_$]+/)
      .filter((w) => w !== '');
    if (words.length > 1) for (const w of words) if (verbs.has(w)) return w;
  }
  return null;
}
