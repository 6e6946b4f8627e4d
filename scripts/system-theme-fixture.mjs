#!/usr/bin/env node
// Records what Pi 1.6.0's `system` theme generator and its OKLab/OKHSL helpers answer for a
// few terminals, so the Rust tests of cli/src/tui/okcolor.rs and system_theme.rs can compare
// against them without Pi installed.
//
// Usage (Node >= 22):
//   node scripts/system-theme-fixture.mjs /path/to/node_modules \
//     > fixtures/system-theme/expected.json
//
// The argument is the node_modules directory holding @earendil-works/pi-coding-agent and
// @earendil-works/pi-tui (default: /work/realpi/pi/node_modules).
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const modules = resolve(process.argv[2] ?? "/work/realpi/pi/node_modules");
const load = (rel) => import(pathToFileURL(join(modules, rel)).href);

const oklab = await load("@earendil-works/pi-tui/dist/oklab.js");
const colors = await load("@earendil-works/pi-tui/dist/colors.js");
const system = await load(
  "@earendil-works/pi-coding-agent/dist/modes/interactive/theme/system-theme.js",
);

const hex = (h) => ({
  r: parseInt(h.slice(1, 3), 16),
  g: parseInt(h.slice(3, 5), 16),
  b: parseInt(h.slice(5, 7), 16),
});
const toHex = ({ r, g, b }) => `#${[r, g, b].map((c) => c.toString(16).padStart(2, "0")).join("")}`;

// Sample colours for the conversions: greys, primaries, pastels, near-black and near-white.
const samples = [
  "#000000", "#ffffff", "#808080", "#ff0000", "#00ff00", "#0000ff", "#ffff00", "#00ffff",
  "#ff00ff", "#1e1e2e", "#cdd6f4", "#f38ba8", "#a6e3a1", "#89b4fa", "#f4b8e4", "#eff1f5",
  "#4c4f69", "#d20f39", "#0a0a0a", "#fafafa", "#8abeb7", "#5f87ff",
];
const conversions = samples.map((h) => {
  const rgb = hex(h);
  const [L, a, b] = oklab.rgbToOklab(rgb);
  const okhsl = oklab.rgbToOkhsl(rgb);
  const back = oklab.okhslToRgb(okhsl.h, okhsl.s, okhsl.l);
  return { hex: h, oklab: [L, a, b], okhsl: [okhsl.h, okhsl.s, okhsl.l], back: toHex(back) };
});

// OKHSL inputs straight to sRGB, over hues, saturations and lightnesses.
const okhslSamples = [];
for (const h of [0, 20, 82.36, 158.68, 231.49, 295, 337.5]) {
  for (const s of [0, 0.3, 0.8, 1]) {
    for (const l of [0.1, 0.5, 0.9]) {
      okhslSamples.push({ hsl: [h, s, l], hex: toHex(oklab.okhslToRgb(h, s, l)) });
    }
  }
}

// OKLCH to sRGB with gamut mapping (chroma reduced at the same hue).
const oklchSamples = [
  [0.7, 0.1, 30], [0.5, 0.3, 150], [1, 0.3, 150], [0.2, 0.05, 260], [0.9, 0.2, 90],
].map(([l, c, h]) => ({ lch: [l, c, h], hex: colors.colorToHex(colors.oklchColor(l, c, h)) }));

// Terminal palettes (ANSI 0-15).
const xterm = [
  "#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
  "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff",
];
const mocha = [
  "#45475a", "#f38ba8", "#a6e3a1", "#f9e2af", "#89b4fa", "#f5c2e7", "#94e2d5", "#bac2de",
  "#585b70", "#f38ba8", "#a6e3a1", "#f9e2af", "#89b4fa", "#f5c2e7", "#94e2d5", "#a6adc8",
];
const latte = [
  "#5c5f77", "#d20f39", "#40a02b", "#df8e1d", "#1e66f5", "#ea76cb", "#179299", "#acb0be",
  "#6c6f85", "#d20f39", "#40a02b", "#df8e1d", "#1e66f5", "#ea76cb", "#179299", "#bcc0cc",
];
const solarized = [
  "#073642", "#dc322f", "#859900", "#b58900", "#268bd2", "#d33682", "#2aa198", "#eee8d5",
  "#002b36", "#cb4b16", "#586e75", "#657b83", "#839496", "#6c71c4", "#93a1a1", "#fdf6e3",
];

const cases = [
  { name: "mocha", background: "#1e1e2e", foreground: "#cdd6f4", palette: mocha },
  { name: "latte", background: "#eff1f5", foreground: "#4c4f69", palette: latte },
  { name: "xterm-black", background: "#000000", foreground: "#e5e5e5", palette: xterm },
  { name: "xterm-white", background: "#ffffff", foreground: "#000000", palette: xterm },
  { name: "solarized-dark", background: "#002b36", foreground: "#839496", palette: solarized },
  { name: "dark-background-only", background: "#101418" },
  { name: "light-background-only", background: "#fbfbf8", foreground: "#202020" },
  { name: "mid-gray", background: "#808080", foreground: "#000000", palette: xterm },
  { name: "mid-gray-no-foreground", background: "#777777" },
  { name: "nothing" },
  { name: "pending", saturation: 0 },
  { name: "dim-foreground", background: "#000000", foreground: "#444444", palette: xterm },
];

const generated = cases.map((c) => {
  const input = {
    background: c.background && hex(c.background),
    foreground: c.foreground && hex(c.foreground),
    palette: c.palette && c.palette.map(hex),
    saturation: c.saturation,
  };
  const out = system.generateSystemThemeColors(input);
  return { ...c, colors: out.colors, dim: out.dim, appearance: out.appearance ?? null };
});

const contrast = [
  ["#ffffff", "#000000"], ["#777777", "#ffffff"], ["#1e1e2e", "#cdd6f4"], ["#d20f39", "#eff1f5"],
].map(([a, b]) => ({ a, b, ratio: system.wcagContrast(hex(a), hex(b)) }));

console.log(
  JSON.stringify(
    { conversions, okhsl: okhslSamples, oklch: oklchSamples, contrast, generated },
    null,
    1,
  ),
);
