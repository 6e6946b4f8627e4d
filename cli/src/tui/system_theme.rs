//! Pi's `system` theme, the default: colours made from the terminal's own.
//!
//! Each colour token belongs to a family, which gives it a hue (from the terminal's palette
//! colour for the family's ANSI slot, or the family's own hue) and a saturation range; its
//! lightness comes from contrast rules alone. A rule asks a token to stand out by some level
//! from each surface it is drawn on (the background, or a panel such as the user-message
//! background). A level is a lightness curve: given the OKLab lightness of the surface, the
//! lightness the token needs, one curve for dark terminals and one for light ones. Panels
//! are solved before what is drawn on them. When a background near mid-grey leaves no room
//! for every level, the levels are relaxed, as little as possible, toward the surface.
//!
//! What the terminal reported decides how much of that applies ([`generate`]):
//! - background and the 16-colour palette: the palette's hues, lightness from the background;
//! - background only: the families' own hues;
//! - nothing: ANSI palette indices and the default colours, which the terminal draws in its
//!   own theme; secondary neutral text is faint (SGR 2) and panels get no background.
//!
//! Until the terminal answers, the theme is grey: the last tier with saturation 0.
//!
//! Everything here is pure; the terminal query lives in [`super::term_colors`].

use super::okcolor::{
    okhsl_to_rgb, oklab_lightness, oklch_to_rgb, rgb_to_okhsl, rgb_to_oklch, toe, wcag_contrast,
    Oklch, Rgb,
};

/// The name settings and `--use-theme` use; reserved (a theme file of that name is ignored).
pub const NAME: &str = "system";

/// Whether a terminal (or a theme) is dark or light.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appearance {
    Dark,
    Light,
}

/// What the terminal reported: its default colours and its ANSI palette (0–15, all of them
/// or none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalColors {
    pub foreground: Option<Rgb>,
    pub background: Option<Rgb>,
    pub palette: Option<Vec<Rgb>>,
}

/// A generated token colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    Rgb(Rgb),
    /// An ANSI palette index, drawn in the terminal's own colour.
    Index(u8),
    /// The terminal's default foreground or background.
    Default,
}

/// The theme's colours by Pi token name, the tokens drawn faint, and the appearance it was
/// made for (`None` when the terminal reported no background).
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub colors: Vec<(&'static str, Paint)>,
    pub faint: Vec<&'static str>,
    pub appearance: Option<Appearance>,
}

impl Generated {
    /// The colour of `token` (the default colour for a token the theme does not have).
    pub fn get(&self, token: &str) -> Paint {
        self.colors
            .iter()
            .find(|(t, _)| *t == token)
            .map_or(Paint::Default, |(_, p)| *p)
    }

    pub fn is_faint(&self, token: &str) -> bool {
        self.faint.contains(&token)
    }
}

// Statics, so a family is known by its address ([`indexed`] asks for the neutral one).
/// A hue family: its own hue (degrees), the OKHSL saturation range it is painted in (most
/// saturated at mid lightness), and the palette slot it takes its hue from.
struct Family {
    hue: f64,
    min: f64,
    max: f64,
    slot: usize,
}

static NEUTRAL: Family = Family {
    hue: 231.49,
    min: 0.02,
    max: 0.08,
    slot: 8,
};
static BLUE: Family = Family {
    hue: 231.49,
    min: 0.1,
    max: 0.68,
    slot: 4,
};
static GREEN: Family = Family {
    hue: 158.68,
    min: 0.1,
    max: 0.76,
    slot: 2,
};
static RED: Family = Family {
    hue: 20.0,
    min: 0.1,
    max: 0.92,
    slot: 1,
};
static YELLOW: Family = Family {
    hue: 82.36,
    min: 0.5,
    max: 1.0,
    slot: 3,
};
static ORANGE: Family = Family {
    hue: 52.0,
    min: 0.12,
    max: 0.85,
    slot: 3,
};
static VIOLET: Family = Family {
    hue: 295.0,
    min: 0.2,
    max: 0.6,
    slot: 5,
};
static CALAMINE: Family = Family {
    hue: 202.43,
    min: 0.1,
    max: 0.74,
    slot: 6,
};
static THINKING_SLATE: Family = Family {
    hue: 231.49,
    min: 0.08,
    max: 0.2,
    slot: 4,
};
static THINKING_BLUE: Family = Family {
    hue: 231.49,
    min: 0.2,
    max: 0.45,
    slot: 4,
};
static THINKING_PERIWINKLE: Family = Family {
    hue: 263.25,
    min: 0.3,
    max: 0.6,
    slot: 6,
};
static THINKING_VIOLET: Family = Family {
    hue: 295.0,
    min: 0.4,
    max: 0.75,
    slot: 5,
};
static THINKING_MAGENTA: Family = Family {
    hue: 337.5,
    min: 0.5,
    max: 0.85,
    slot: 13,
};
static THINKING_RED: Family = Family {
    hue: 20.0,
    min: 0.95,
    max: 1.0,
    slot: 1,
};

/// Every token the theme makes, with its family.
static TOKENS: &[(&str, &Family)] = &[
    ("selectedBg", &BLUE),
    ("searchMatchBg", &ORANGE),
    ("userMessageBg", &BLUE),
    ("customMessageBg", &VIOLET),
    ("toolPendingBg", &NEUTRAL),
    ("toolSuccessBg", &GREEN),
    ("toolErrorBg", &RED),
    ("text", &NEUTRAL),
    ("userMessageText", &NEUTRAL),
    ("customMessageText", &NEUTRAL),
    ("toolTitle", &NEUTRAL),
    ("syntaxOperator", &NEUTRAL),
    ("syntaxPunctuation", &NEUTRAL),
    ("muted", &NEUTRAL),
    ("dim", &NEUTRAL),
    ("thinkingText", &NEUTRAL),
    ("toolOutput", &NEUTRAL),
    ("mdLinkUrl", &NEUTRAL),
    ("mdQuote", &NEUTRAL),
    ("mdQuoteBorder", &NEUTRAL),
    ("mdHr", &NEUTRAL),
    ("mdCodeBlockBorder", &NEUTRAL),
    ("toolDiffContext", &NEUTRAL),
    ("syntaxComment", &NEUTRAL),
    ("scrollbarTrack", &NEUTRAL),
    ("scrollbarThumb", &NEUTRAL),
    ("searchMatchText", &NEUTRAL),
    ("borderMuted", &NEUTRAL),
    ("accent", &VIOLET),
    ("borderAccent", &VIOLET),
    ("customMessageLabel", &VIOLET),
    ("mdCode", &VIOLET),
    ("mdListBullet", &VIOLET),
    ("syntaxType", &VIOLET),
    ("border", &BLUE),
    ("mdLink", &BLUE),
    ("syntaxKeyword", &BLUE),
    ("syntaxVariable", &CALAMINE),
    ("success", &GREEN),
    ("mdCodeBlock", &GREEN),
    ("toolDiffAdded", &GREEN),
    ("bashMode", &GREEN),
    ("syntaxNumber", &GREEN),
    ("error", &RED),
    ("toolDiffRemoved", &RED),
    ("warning", &YELLOW),
    ("mdHeading", &YELLOW),
    ("syntaxFunction", &YELLOW),
    ("syntaxString", &ORANGE),
    ("thinkingOff", &NEUTRAL),
    ("thinkingMinimal", &THINKING_SLATE),
    ("thinkingLow", &THINKING_BLUE),
    ("thinkingMedium", &THINKING_PERIWINKLE),
    ("thinkingHigh", &THINKING_VIOLET),
    ("thinkingXhigh", &THINKING_MAGENTA),
    ("thinkingMax", &THINKING_RED),
];

fn family_of(token: &str) -> &'static Family {
    TOKENS
        .iter()
        .find(|(t, _)| *t == token)
        .map_or(&NEUTRAL, |(_, f)| f)
}

/// A palette slot other than the family's, where two similar tokens would share a hue.
fn slot_of(token: &str) -> usize {
    match token {
        "syntaxString" => 2,
        "syntaxNumber" => 5,
        "searchMatchBg" => 3,
        _ => family_of(token).slot,
    }
}

/// The panels: backgrounds drawn on the terminal's background.
const PANELS: &[&str] = &[
    "userMessageBg",
    "toolPendingBg",
    "toolSuccessBg",
    "toolErrorBg",
    "selectedBg",
    "searchMatchBg",
    "customMessageBg",
];
const TOOL_PANELS: &[&str] = &["toolPendingBg", "toolSuccessBg", "toolErrorBg"];
const MESSAGE_PANELS: &[&str] = &["userMessageBg", "customMessageBg"];
/// Body-text tokens: the terminal's own foreground when it contrasts enough.
const FOREGROUND_TOKENS: &[&str] = &["text", "userMessageText", "toolTitle"];
/// The WCAG ratio body text keeps on every surface it is drawn on.
const TEXT_MIN_CONTRAST: f64 = 4.5;

/// A contrast level's lightness curve for one appearance: a polynomial in the surface's
/// OKLab lightness (constant term first), valid for surfaces within `reach`.
struct Curve {
    coefficients: [f64; 6],
    reach: (f64, f64),
}

/// A contrast level: its curve on dark and on light terminals.
struct Level {
    dark: Curve,
    light: Curve,
}

macro_rules! level {
    ($name:ident, [$($d:expr),*], $dr:expr, [$($l:expr),*], $lr:expr) => {
        const $name: Level = Level {
            dark: Curve { coefficients: [$($d),*], reach: $dr },
            light: Curve { coefficients: [$($l),*], reach: $lr },
        };
    };
}

// The curves were fitted (by Pi's authors) to their reference design; the data is theirs.
level!(
    PANEL,
    [0.29131, -0.39746, 2.33185, -0.85524, -1.2076, 0.86276],
    (0.0, 0.979),
    [-3.74073, 27.94549, -78.44258, 112.6798, -79.60015, 22.11277],
    (0.348, 1.0)
);
level!(
    TRACK,
    [0.39028, -0.23015, 0.83573, 2.43829, -4.38292, 2.01582],
    (0.0, 0.946),
    [-5.24921, 38.37322, -107.28833, 152.10005, -106.17127, 29.18061],
    (0.368, 1.0)
);
level!(
    THINKING0,
    [0.52988, -0.05809, -0.30924, 4.63567, -6.52933, 2.89108],
    (0.0, 0.873),
    [-28.27749, 182.85284, -469.62416, 603.15916, -384.59976, 97.35147],
    (0.51, 1.0)
);
level!(
    THINKING1,
    [0.55278, -0.03667, -0.45659, 4.95347, -6.90265, 3.0706],
    (0.0, 0.858),
    [-37.10484, 235.86282, -596.62344, 754.3633, -474.00763, 118.3551],
    (0.535, 1.0)
);
level!(
    THINKING2,
    [0.57486, -0.01765, -0.58987, 5.25227, -7.27175, 3.25532],
    (0.0, 0.842),
    [-59.89653, 377.05024, -945.07843, 1182.03145, -734.96375, 181.68658],
    (0.556, 1.0)
);
level!(
    THINKING3,
    [0.59621, -0.00062, -0.71148, 5.53588, -7.6392, 3.44606],
    (0.0, 0.827),
    [
        -72.07122,
        445.84082,
        -1099.57352,
        1353.88793,
        -829.53392,
        202.26164
    ],
    (0.58, 1.0)
);
level!(
    THINKING4,
    [0.61691, 0.01462, -0.82288, 5.80651, -8.00641, 3.64333],
    (0.0, 0.811),
    [
        -110.14338,
        674.21488,
        -1645.75941,
        2004.32367,
        -1215.15899,
        293.3183
    ],
    (0.6, 1.0)
);
level!(
    THINKING5,
    [0.63702, 0.02826, -0.92498, 6.06465, -8.37246, 3.84651],
    (0.0, 0.795),
    [
        -175.47701,
        1063.54495,
        -2570.70594,
        3098.80776,
        -1860.15527,
        444.76392
    ],
    (0.62, 1.0)
);
level!(
    THINKING6,
    [0.65658, 0.04044, -1.01835, 6.30989, -8.73529, 4.05439],
    (0.0, 0.779),
    [
        -183.81712,
        1094.70055,
        -2602.68539,
        3088.71276,
        -1826.91131,
        430.75931
    ],
    (0.643, 1.0)
);
level!(
    SUBTLE,
    [0.56762, -0.02475, -0.5383, 5.12628, -7.10931, 3.17324],
    (0.0, 0.848),
    [
        -232.85459,
        1376.54473,
        -3249.11801,
        3827.91186,
        -2248.29472,
        526.55751
    ],
    (0.657, 1.0)
);
level!(
    THUMB,
    [0.60323, 0.00278, -0.73328, 5.57157, -7.68067, 3.46933],
    (0.0, 0.823),
    [
        -82.89897,
        511.01355,
        -1255.98095,
        1540.76821,
        -940.68087,
        228.58523
    ],
    (0.586, 1.0)
);
level!(
    READABLE,
    [0.66937, 0.04704, -1.06871, 6.43941, -8.9332, 4.17229],
    (0.0, 0.77),
    [
        -1554.52576,
        8733.56817,
        -19604.93507,
        21977.72696,
        -12300.99599,
        2749.81288
    ],
    (0.751, 1.0)
);
level!(
    EMPHASIS,
    [0.7303, 0.07695, -1.31626, 7.1681, -10.14436, 4.92846],
    (0.0, 0.712),
    [
        -4948.31942,
        26870.91986,
        -58334.48399,
        63280.17197,
        -34298.01053,
        7430.30146
    ],
    (0.811, 1.0)
);
level!(
    TEXT_ON_PANEL,
    [0.86713, 0.05232, -0.89428, 4.79014, -5.5432, 1.75023],
    (0.0, 0.542),
    [
        -8570.89457,
        43954.60805,
        -90084.00702,
        92220.6791,
        -47152.15802,
        9632.27113
    ],
    (0.867, 1.0)
);
level!(
    TEXT,
    [0.89242, 0.02311, -0.44862, 2.34417, -0.06084, -2.63844],
    (0.0, 0.5),
    [
        -2004.67048,
        6664.47299,
        -6060.70202,
        -1792.61209,
        5133.82359,
        -1939.85583
    ],
    (0.894, 1.0)
);

const THINKING_LEVELS: [&Level; 7] = [
    &THINKING0, &THINKING1, &THINKING2, &THINKING3, &THINKING4, &THINKING5, &THINKING6,
];
const THINKING_TOKENS: [&str; 7] = [
    "thinkingOff",
    "thinkingMinimal",
    "thinkingLow",
    "thinkingMedium",
    "thinkingHigh",
    "thinkingXhigh",
    "thinkingMax",
];

/// The level a relaxed theme squeezes the stronger levels toward first.
fn readable_floor(appearance: Appearance) -> &'static Level {
    match appearance {
        Appearance::Dark => &READABLE,
        Appearance::Light => &SUBTLE,
    }
}

/// "`token` stands out by `level` from each surface in `on`" (`background` is the terminal's).
struct Rule {
    token: &'static str,
    on: Vec<&'static str>,
    level: &'static Level,
}

fn rules() -> Vec<Rule> {
    let mut out = Vec::new();
    let mut add = |tokens: &[&'static str], on: &[&[&'static str]], level: &'static Level| {
        let on: Vec<&'static str> = on.concat();
        for &token in tokens {
            out.push(Rule {
                token,
                on: on.clone(),
                level,
            });
        }
    };
    const BG: &[&str] = &["background"];
    const SELECTED: &[&str] = &["selectedBg"];
    const CUSTOM: &[&str] = &["customMessageBg"];
    add(PANELS, &[BG], &PANEL);
    add(&["text"], &[BG], &TEXT);
    add(&["text"], &[SELECTED], &TEXT_ON_PANEL);
    add(&["userMessageText"], &[&["userMessageBg"]], &TEXT_ON_PANEL);
    add(&["toolTitle"], &[TOOL_PANELS], &TEXT_ON_PANEL);
    add(
        &["accent", "success", "error", "warning"],
        &[BG, SELECTED, TOOL_PANELS],
        &READABLE,
    );
    add(&["muted"], &[BG, SELECTED, CUSTOM, TOOL_PANELS], &READABLE);
    add(&["dim"], &[BG, SELECTED, CUSTOM, TOOL_PANELS], &SUBTLE);
    add(&["thinkingText"], &[BG], &READABLE);
    add(&["customMessageText"], &[CUSTOM, TOOL_PANELS], &READABLE);
    add(
        &["customMessageLabel"],
        &[BG, CUSTOM, SELECTED, TOOL_PANELS],
        &READABLE,
    );
    add(&["toolOutput"], &[BG, TOOL_PANELS], &READABLE);
    add(
        &[
            "mdHeading",
            "mdLink",
            "mdLinkUrl",
            "mdCode",
            "mdQuote",
            "mdCodeBlockBorder",
            "mdListBullet",
        ],
        &[BG, MESSAGE_PANELS],
        &READABLE,
    );
    add(
        &["mdCodeBlock"],
        &[BG, MESSAGE_PANELS, TOOL_PANELS],
        &READABLE,
    );
    add(
        &["toolDiffAdded", "toolDiffRemoved", "toolDiffContext"],
        &[BG, TOOL_PANELS],
        &READABLE,
    );
    add(
        &[
            "syntaxComment",
            "syntaxKeyword",
            "syntaxFunction",
            "syntaxVariable",
            "syntaxString",
            "syntaxNumber",
            "syntaxType",
            "syntaxOperator",
            "syntaxPunctuation",
        ],
        &[BG, MESSAGE_PANELS, TOOL_PANELS],
        &READABLE,
    );
    add(&["searchMatchText"], &[&["searchMatchBg"]], &READABLE);
    add(&["bashMode", "border", "borderAccent"], &[BG], &READABLE);
    add(&["borderMuted"], &[BG], &SUBTLE);
    add(
        &["mdQuoteBorder", "mdHr"],
        &[BG, MESSAGE_PANELS, TOOL_PANELS],
        &READABLE,
    );
    add(&["scrollbarTrack"], &[BG], &TRACK);
    add(&["scrollbarThumb"], &[&["scrollbarTrack"]], &THUMB);
    for (token, level) in THINKING_TOKENS.into_iter().zip(THINKING_LEVELS) {
        add(&[token], &[BG], level);
    }
    out
}

/// The tokens with rules, each after every surface it is drawn on.
fn solve_order(rules: &[Rule]) -> Vec<&'static str> {
    fn visit(token: &'static str, rules: &[Rule], order: &mut Vec<&'static str>) {
        if order.contains(&token) {
            return;
        }
        for rule in rules.iter().filter(|r| r.token == token) {
            for surface in &rule.on {
                if *surface != "background" {
                    visit(surface, rules, order);
                }
            }
        }
        order.push(token);
    }
    let mut order = Vec::new();
    for rule in rules {
        visit(rule.token, rules, &mut order);
    }
    order
}

/// Dark or light, from the reported colours: the way the terminal's own foreground goes
/// when it is clearly apart from the background and white or black text would be readable
/// that way; otherwise whichever of white and black text contrasts more.
pub fn terminal_appearance(background: Rgb, foreground: Option<Rgb>) -> Appearance {
    let white = wcag_contrast(Rgb::WHITE, background);
    let black = wcag_contrast(Rgb::BLACK, background);
    if let Some(fg) = foreground {
        let (fg_l, bg_l) = (oklab_lightness(fg), oklab_lightness(background));
        if (fg_l - bg_l).abs() > 0.05 {
            let (appearance, best) = if fg_l > bg_l {
                (Appearance::Dark, white)
            } else {
                (Appearance::Light, black)
            };
            if best >= TEXT_MIN_CONTRAST {
                return appearance;
            }
        }
    }
    if white >= black {
        Appearance::Dark
    } else {
        Appearance::Light
    }
}

/// A bell over lightness (a Gaussian around 0.5 scaled to 0 at black and white, 1 in the
/// middle): how much of a family's saturation range applies there.
fn bell(l: f64) -> f64 {
    let gaussian = |x: f64| (-(x - 0.5).powi(2) / (2.0 * 0.25f64.powi(2))).exp();
    (gaussian(l) - gaussian(0.0)) / (1.0 - gaussian(0.0))
}

/// A family's saturation at `l` relative to its maximum.
fn saturation_curve(family: &Family, l: f64) -> f64 {
    let floor = if family.max > 0.0 {
        family.min / family.max
    } else {
        1.0
    };
    floor + (1.0 - floor) * bell(l)
}

/// The lightness `level` asks for on a surface of lightness `surface`, where reachable.
fn level_target(level: &Level, appearance: Appearance, surface: f64) -> Option<f64> {
    let curve = match appearance {
        Appearance::Dark => &level.dark,
        Appearance::Light => &level.light,
    };
    if surface < curve.reach.0 || surface > curve.reach.1 {
        return None;
    }
    Some(
        curve
            .coefficients
            .iter()
            .enumerate()
            .map(|(power, c)| c * surface.powi(power as i32))
            .sum(),
    )
}

/// A palette colour as a hue source: its OKHSL coordinates and its OKLCH chroma.
#[derive(Clone, Copy)]
struct Source {
    h: f64,
    s: f64,
    l: f64,
    chroma: f64,
}

fn source_of(c: Rgb) -> Source {
    let hsl = rgb_to_okhsl(c);
    Source {
        h: hsl.h,
        s: hsl.s,
        l: hsl.l,
        chroma: rgb_to_oklch(c).c,
    }
}

/// `source`'s hue at OKHSL lightness `l`. Its saturation holds at its own lightness and
/// falls off toward black and white along the family's curve (never rising above it); its
/// OKLCH chroma is capped the same way, so a pastel stays a pastel where the gamut is wider.
fn anchored(source: Source, family: &Family, l: f64, saturation: f64) -> Rgb {
    let anchor = saturation_curve(family, source.l);
    let falloff = if anchor > 0.0 {
        (saturation_curve(family, l) / anchor).min(1.0)
    } else {
        1.0
    };
    let color = okhsl_to_rgb(source.h, source.s * falloff * saturation, l);
    let cap = source.chroma * falloff * saturation;
    let lch = rgb_to_oklch(color);
    if lch.c <= cap {
        color
    } else {
        oklch_to_rgb(Oklch {
            l: lch.l,
            c: cap,
            h: source.h,
        })
    }
}

/// Moves a text colour toward white (`lighter`) or black until it reaches the body-text
/// contrast on every surface (or as far as it goes).
fn with_text_contrast(color: Rgb, surfaces: &[Rgb], lighter: bool) -> Rgb {
    let meets = |c: Rgb| {
        surfaces
            .iter()
            .all(|s| wcag_contrast(c, *s) >= TEXT_MIN_CONTRAST)
    };
    if meets(color) {
        return color;
    }
    let hsl = rgb_to_okhsl(color);
    let at = |l: f64| okhsl_to_rgb(hsl.h, hsl.s, l);
    let extreme = if lighter { 1.0 } else { 0.0 };
    if !meets(at(extreme)) {
        return at(extreme);
    }
    let (mut low, mut high) = (hsl.l, extreme);
    for _ in 0..20 {
        let mid = (low + high) / 2.0;
        if meets(at(mid)) {
            high = mid;
        } else {
            low = mid;
        }
    }
    at(high)
}

/// The theme's colours for what the terminal reported. `saturation` (0–1) scales every
/// colour's saturation: 0 is the grey theme shown while the terminal has not answered.
pub fn generate(input: &TerminalColors, saturation: f64) -> Generated {
    let saturation = saturation.clamp(0.0, 1.0);
    let Some(background) = input.background else {
        return indexed(saturation);
    };
    let palette: Option<Vec<Source>> = input
        .palette
        .as_ref()
        .filter(|p| p.len() == 16)
        .map(|p| p.iter().copied().map(source_of).collect());
    let appearance = terminal_appearance(background, input.foreground);
    let lighter = appearance == Appearance::Dark;
    let extreme = if lighter { 1.0 } else { 0.0 };
    let background_l = oklab_lightness(background);
    let rules = rules();
    let order = solve_order(&rules);

    let paint = |token: &str, oklab_l: f64| -> Rgb {
        let l = toe(oklab_l);
        let family = family_of(token);
        match &palette {
            None => okhsl_to_rgb(
                family.hue,
                (family.min + (family.max - family.min) * bell(l)) * saturation,
                l,
            ),
            Some(p) => anchored(p[slot_of(token)], family, l, saturation),
        }
    };
    // The lightness a level needs on a surface, relaxed by `t`: from 0 to 1 the levels
    // stronger than the readable floor move down to it, from 1 to 2 every level moves
    // toward the surface itself.
    let target = |level: &Level, surface: f64, t: f64| -> Option<f64> {
        let reached = level_target(level, appearance, surface);
        if reached.is_none() && t == 0.0 {
            return None;
        }
        let distance = reached.unwrap_or(extreme) - surface;
        let floor = level_target(readable_floor(appearance), appearance, surface)
            .unwrap_or(extreme)
            - surface;
        let compressed = if distance.abs() > floor.abs() {
            distance - (distance - floor) * t.min(1.0)
        } else {
            distance
        };
        Some(surface + compressed * (1.0 - (t - 1.0).max(0.0)))
    };
    // Keeps a panel such that white (on dark) or black (on light) text still reaches the
    // body-text contrast on it; only backgrounds near mid-grey come close.
    let extreme_text = if lighter { Rgb::WHITE } else { Rgb::BLACK };
    let readable = |c: Rgb| wcag_contrast(extreme_text, c) >= TEXT_MIN_CONTRAST;
    let limit_panel = |token: &str, l: f64| -> Rgb {
        let color = paint(token, l);
        if readable(color) {
            return color;
        }
        let (mut low, mut high) = (background_l, l);
        for _ in 0..20 {
            let mid = (low + high) / 2.0;
            if readable(paint(token, mid)) {
                low = mid;
            } else {
                high = mid;
            }
        }
        paint(token, low)
    };
    let solve = |t: f64| -> Option<Vec<(&'static str, Rgb)>> {
        let mut solved: Vec<(&'static str, Rgb)> = vec![("background", background)];
        let lookup = |solved: &[(&str, Rgb)], name: &str| {
            solved
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(background, |(_, c)| *c)
        };
        for &token in &order {
            let mut targets = Vec::new();
            for rule in rules.iter().filter(|r| r.token == token) {
                for &surface in &rule.on {
                    let surface_l = oklab_lightness(lookup(&solved, surface));
                    let value = target(rule.level, surface_l, t)?;
                    if !(0.0..=1.0).contains(&value) {
                        return None;
                    }
                    targets.push(value);
                }
            }
            let l = if lighter {
                targets.iter().copied().fold(f64::MIN, f64::max)
            } else {
                targets.iter().copied().fold(f64::MAX, f64::min)
            };
            let color = if PANELS.contains(&token) {
                limit_panel(token, l)
            } else {
                paint(token, l)
            };
            solved.push((token, color));
        }
        Some(solved)
    };

    let mut relaxation = 0.0;
    let solved = match solve(0.0) {
        Some(s) => s,
        None => {
            // Not every level fits (a background near mid-grey): relax as little as
            // possible. Full relaxation always fits.
            let (mut low, mut high) = (0.0, 2.0);
            let mut best = solve(high);
            for _ in 0..20 {
                let mid = (low + high) / 2.0;
                match solve(mid) {
                    Some(s) => {
                        high = mid;
                        best = Some(s);
                    }
                    None => low = mid,
                }
            }
            relaxation = high;
            best.unwrap_or_default()
        }
    };
    let find = |name: &str| solved.iter().find(|(n, _)| *n == name).map(|(_, c)| *c);

    let mut colors: Vec<(&'static str, Paint)> = TOKENS
        .iter()
        .map(|(token, _)| (*token, find(token).map_or(Paint::Default, Paint::Rgb)))
        .collect();
    for &token in FOREGROUND_TOKENS {
        let surfaces: Vec<Rgb> = rules
            .iter()
            .filter(|r| r.token == token)
            .flat_map(|r| r.on.iter().map(|&s| find(s).unwrap_or(background)))
            .collect();
        // The terminal's foreground where it is clearly stronger than muted text; else its
        // hue at just enough lightness.
        let mut text = find(token);
        let mut use_default = false;
        if let Some(fg) = input.foreground {
            let targets: Option<Vec<f64>> = surfaces
                .iter()
                .map(|s| {
                    target(&EMPHASIS, oklab_lightness(*s), relaxation)
                        .filter(|v| (0.0..=1.0).contains(v))
                })
                .collect();
            if let Some(targets) = targets {
                let needed = if lighter {
                    targets.iter().copied().fold(f64::MIN, f64::max)
                } else {
                    targets.iter().copied().fold(f64::MAX, f64::min)
                };
                let fg_l = oklab_lightness(fg);
                if (lighter && fg_l >= needed) || (!lighter && fg_l <= needed) {
                    use_default = true;
                } else {
                    text = Some(anchored(source_of(fg), &NEUTRAL, toe(needed), saturation));
                }
            }
        }
        let value = if use_default {
            Paint::Default
        } else if let Some(text) = text {
            // Body text keeps 4.5:1 on its surfaces, even on a relaxed mid-grey background.
            Paint::Rgb(with_text_contrast(text, &surfaces, lighter))
        } else {
            continue;
        };
        if let Some(slot) = colors.iter_mut().find(|(t, _)| *t == token) {
            slot.1 = value;
        }
    }
    Generated {
        colors,
        faint: Vec::new(),
        appearance: Some(appearance),
    }
}

/// The tier for terminals that reported nothing: palette indices (which the terminal draws
/// in its own theme) for the coloured families, the default colours for the neutral ones,
/// faint for neutral text below body text, and no panel backgrounds.
fn indexed(saturation: f64) -> Generated {
    let mut colors = Vec::new();
    let mut faint = Vec::new();
    for &(token, family) in TOKENS {
        if PANELS.contains(&token) {
            colors.push((token, Paint::Default));
            continue;
        }
        let neutral = std::ptr::eq(family, &NEUTRAL);
        let paint = if !neutral && saturation > 0.0 {
            Paint::Index(slot_of(token) as u8)
        } else {
            Paint::Default
        };
        colors.push((token, paint));
        if neutral && !FOREGROUND_TOKENS.contains(&token) {
            faint.push(token);
        }
    }
    Generated {
        colors,
        faint,
        appearance: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn fixture() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/system-theme/expected.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn rgb(v: &Value) -> Option<Rgb> {
        v.as_str().and_then(Rgb::from_hex)
    }

    fn input_of(case: &Value) -> TerminalColors {
        TerminalColors {
            foreground: rgb(&case["foreground"]),
            background: rgb(&case["background"]),
            palette: case["palette"]
                .as_array()
                .map(|p| p.iter().filter_map(rgb).collect()),
        }
    }

    fn paint_of(v: &Value) -> Paint {
        match v {
            Value::Number(n) => Paint::Index(n.as_u64().unwrap() as u8),
            Value::String(s) if s.is_empty() => Paint::Default,
            other => Paint::Rgb(rgb(other).unwrap()),
        }
    }

    /// Every token of every recorded terminal, as Pi's generator made it.
    #[test]
    fn generated_colors_match_pi() {
        let fixture = fixture();
        for case in fixture["generated"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let saturation = case["saturation"].as_f64().unwrap_or(1.0);
            let got = generate(&input_of(case), saturation);
            let want = case["colors"].as_object().unwrap();
            assert_eq!(got.colors.len(), want.len(), "{name}: token count");
            for (token, value) in want {
                assert_eq!(got.get(token), paint_of(value), "{name}: {token}");
            }
            let faint: Vec<&str> = case["dim"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(got.faint, faint, "{name}: faint tokens");
            let appearance = match case["appearance"].as_str() {
                Some("dark") => Some(Appearance::Dark),
                Some("light") => Some(Appearance::Light),
                _ => None,
            };
            assert_eq!(got.appearance, appearance, "{name}: appearance");
        }
    }

    fn l_of(g: &Generated, token: &str) -> f64 {
        match g.get(token) {
            Paint::Rgb(c) => oklab_lightness(c),
            other => panic!("{token}: {other:?}"),
        }
    }

    /// Pi's ordering rules: on a dark background text is lighter than muted, muted lighter
    /// than dim, dim lighter than the background, and the panels lighter than the
    /// background; on a light background each order turns around.
    #[test]
    fn lightness_follows_the_levels_on_dark_and_light() {
        let dark = generate(
            &TerminalColors {
                background: Some(Rgb::new(0x10, 0x10, 0x14)),
                ..Default::default()
            },
            1.0,
        );
        let bg = oklab_lightness(Rgb::new(0x10, 0x10, 0x14));
        assert_eq!(dark.appearance, Some(Appearance::Dark));
        let (text, muted, dim) = (
            l_of(&dark, "text"),
            l_of(&dark, "muted"),
            l_of(&dark, "dim"),
        );
        assert!(
            text > muted && muted > dim && dim > bg,
            "{text} {muted} {dim} {bg}"
        );
        assert!(l_of(&dark, "userMessageBg") > bg);
        assert!(l_of(&dark, "borderMuted") < l_of(&dark, "border"));

        let light = generate(
            &TerminalColors {
                background: Some(Rgb::new(0xfa, 0xfa, 0xf5)),
                ..Default::default()
            },
            1.0,
        );
        let bg = oklab_lightness(Rgb::new(0xfa, 0xfa, 0xf5));
        assert_eq!(light.appearance, Some(Appearance::Light));
        let (text, muted, dim) = (
            l_of(&light, "text"),
            l_of(&light, "muted"),
            l_of(&light, "dim"),
        );
        assert!(
            text < muted && muted < dim && dim < bg,
            "{text} {muted} {dim} {bg}"
        );
        assert!(l_of(&light, "userMessageBg") < bg);
        // Body text reaches 4.5:1 on the background and on the selection.
        for g in [&dark, &light] {
            let Paint::Rgb(text) = g.get("text") else {
                panic!("text")
            };
            let Paint::Rgb(selected) = g.get("selectedBg") else {
                panic!("selectedBg")
            };
            assert!(wcag_contrast(text, selected) >= TEXT_MIN_CONTRAST);
        }
    }

    /// The palette gives the hue: red errors from the palette's red, and the terminal's
    /// own foreground for body text when it contrasts enough.
    #[test]
    fn palette_hues_and_the_terminal_foreground() {
        let mut palette = vec![Rgb::new(0x80, 0x80, 0x80); 16];
        palette[1] = Rgb::new(0xff, 0x30, 0x30);
        palette[4] = Rgb::new(0x30, 0x60, 0xff);
        let g = generate(
            &TerminalColors {
                background: Some(Rgb::BLACK),
                foreground: Some(Rgb::new(0xee, 0xee, 0xee)),
                palette: Some(palette.clone()),
            },
            1.0,
        );
        assert_eq!(g.get("text"), Paint::Default);
        let hue = |token: &str| match g.get(token) {
            Paint::Rgb(c) => rgb_to_okhsl(c).h,
            other => panic!("{other:?}"),
        };
        let near = |a: f64, b: f64| ((a - b + 540.0) % 360.0 - 180.0).abs() < 6.0;
        assert!(near(hue("error"), rgb_to_okhsl(palette[1]).h));
        assert!(near(hue("border"), rgb_to_okhsl(palette[4]).h));
        // A palette of fifteen colours is no palette: the families' own hues.
        let partial = generate(
            &TerminalColors {
                background: Some(Rgb::BLACK),
                foreground: None,
                palette: Some(palette[..15].to_vec()),
            },
            1.0,
        );
        let error_hue = match partial.get("error") {
            Paint::Rgb(c) => rgb_to_okhsl(c).h,
            other => panic!("{other:?}"),
        };
        assert!(near(error_hue, RED.hue), "{error_hue}");
    }

    #[test]
    fn nothing_reported_uses_palette_indices_and_faint_neutrals() {
        let g = generate(&TerminalColors::default(), 1.0);
        assert_eq!(g.appearance, None);
        assert_eq!(g.get("error"), Paint::Index(1));
        assert_eq!(g.get("success"), Paint::Index(2));
        assert_eq!(g.get("syntaxString"), Paint::Index(2));
        assert_eq!(g.get("accent"), Paint::Index(5));
        assert_eq!(g.get("thinkingXhigh"), Paint::Index(13));
        assert_eq!(g.get("text"), Paint::Default);
        assert_eq!(g.get("userMessageBg"), Paint::Default);
        assert!(g.is_faint("muted") && g.is_faint("dim") && !g.is_faint("text"));
        // While the terminal has not answered: no colour at all.
        let grey = generate(&TerminalColors::default(), 0.0);
        assert!(grey.colors.iter().all(|(_, p)| *p == Paint::Default));
        assert_eq!(grey.faint, g.faint);
        // Grey with a background: every colour is a grey.
        let grey = generate(
            &TerminalColors {
                background: Some(Rgb::new(0x20, 0x20, 0x20)),
                ..Default::default()
            },
            0.0,
        );
        for (token, p) in &grey.colors {
            if let Paint::Rgb(c) = p {
                assert!(c.r == c.g && c.g == c.b, "{token}: {c:?}");
            }
        }
    }

    #[test]
    fn appearance_from_background_and_foreground() {
        assert_eq!(terminal_appearance(Rgb::BLACK, None), Appearance::Dark);
        assert_eq!(terminal_appearance(Rgb::WHITE, None), Appearance::Light);
        // Mid-grey with black text is light; with white text it has too little contrast to
        // say so, and black text contrasts more.
        let grey = Rgb::new(0x80, 0x80, 0x80);
        assert_eq!(
            terminal_appearance(grey, Some(Rgb::BLACK)),
            Appearance::Light
        );
        assert_eq!(
            terminal_appearance(grey, Some(Rgb::WHITE)),
            Appearance::Light
        );
        let dark_grey = Rgb::new(0x50, 0x50, 0x50);
        assert_eq!(
            terminal_appearance(dark_grey, Some(Rgb::WHITE)),
            Appearance::Dark
        );
    }
}
