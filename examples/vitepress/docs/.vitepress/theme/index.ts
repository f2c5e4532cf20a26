// VitePress's default theme, plus one rule: the element keeps the step it scrolls to clear of
// the sticky nav bar (the element reads --ctrlrun-scroll-offset; the default is half a line).
import DefaultTheme from 'vitepress/theme';
import './ctrlrun.css';

export default DefaultTheme;
