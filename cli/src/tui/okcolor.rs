//! Colour math for the `system` theme, free of any terminal: sRGB, OKLab and its polar form
//! OKLCH, OKHSL (OKLab re-shaped so saturation is relative to what sRGB can show at a hue and
//! lightness), and the WCAG 2 contrast ratio.
//!
//! OKLab, OKLCH and OKHSL are Björn Ottosson's colour spaces
//! (<https://bottosson.github.io/posts/oklab/>, <https://bottosson.github.io/posts/colorpicker/>);
//! the gamut estimates below follow his published method. Channels are 8-bit sRGB; every
//! conversion back to sRGB rounds and clips, as a terminal colour must.

use std::f64::consts::PI;

/// An 8-bit sRGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rgb {
    pub r: u8,
    pub g: u8,
    pub b: u8,
}

impl Rgb {
    pub const BLACK: Rgb = Rgb { r: 0, g: 0, b: 0 };
    pub const WHITE: Rgb = Rgb {
        r: 255,
        g: 255,
        b: 255,
    };

    pub const fn new(r: u8, g: u8, b: u8) -> Rgb {
        Rgb { r, g, b }
    }

    /// `#rrggbb` (either case); anything else is `None`.
    pub fn from_hex(text: &str) -> Option<Rgb> {
        let digits = text.strip_prefix('#')?;
        if digits.len() != 6 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let channel = |i: usize| u8::from_str_radix(&digits[i..i + 2], 16).ok();
        Some(Rgb::new(channel(0)?, channel(2)?, channel(4)?))
    }

    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.r, self.g, self.b)
    }

    fn channels(self) -> [f64; 3] {
        [self.r, self.g, self.b].map(|c| f64::from(c) / 255.0)
    }
}

/// OKHSL: hue in degrees (0 for greys), saturation and lightness 0–1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Okhsl {
    pub h: f64,
    pub s: f64,
    pub l: f64,
}

/// OKLCH: OKLab lightness 0–1, chroma, hue in degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Oklch {
    pub l: f64,
    pub c: f64,
    pub h: f64,
}

type Vec3 = [f64; 3];
type Mat3 = [[f64; 3]; 3];

fn apply(m: &Mat3, v: Vec3) -> Vec3 {
    m.map(|row| row[0] * v[0] + row[1] * v[1] + row[2] * v[2])
}

// The OKLab matrices: linear sRGB to cone response (LMS), its cube root to Lab, and back.
const RGB_TO_LMS: Mat3 = [
    [
        0.412_221_469_470_762_9,
        0.536_332_537_261_734_9,
        0.051_445_993_267_502_2,
    ],
    [
        0.211_903_495_817_825_1,
        0.680_699_550_645_234_4,
        0.107_396_953_536_940_5,
    ],
    [
        0.088_302_459_190_056_4,
        0.281_718_839_136_121_5,
        0.629_978_701_673_822_2,
    ],
];
const LMS_TO_LAB: Mat3 = [
    [
        0.210_454_268_309_314,
        0.793_617_774_702_305,
        -0.004_072_043_011_619_3,
    ],
    [
        1.977_998_532_431_168_4,
        -2.428_592_242_048_58,
        0.450_593_709_617_411,
    ],
    [
        0.025_904_042_465_547_8,
        0.782_771_712_457_529_6,
        -0.808_675_754_923_077_4,
    ],
];
const LAB_TO_LMS: Mat3 = [
    [1.0, 0.396_337_777_376_174_9, 0.215_803_757_309_913_6],
    [1.0, -0.105_561_345_815_658_6, -0.063_854_172_825_813_3],
    [1.0, -0.089_484_177_529_811_9, -1.291_485_548_019_409_2],
];
const LMS_TO_RGB: Mat3 = [
    [
        4.076_741_636_075_958,
        -3.307_711_539_258_063,
        0.230_969_903_182_104_3,
    ],
    [
        -1.268_437_973_285_031_5,
        2.609_757_349_287_688,
        -0.341_319_376_002_657,
    ],
    [
        -0.004_196_076_138_675_6,
        -0.703_418_617_935_936_2,
        1.707_614_694_074_611_7,
    ],
];

/// The sRGB transfer curve, encoded to linear (both 0–1).
pub fn srgb_to_linear(v: f64) -> f64 {
    if v <= 0.04045 {
        v / 12.92
    } else {
        ((v + 0.055) / 1.055).powf(2.4)
    }
}

/// The sRGB transfer curve, linear to encoded (both 0–1).
pub fn linear_to_srgb(v: f64) -> f64 {
    if v > 0.003_130_8 {
        1.055 * v.powf(1.0 / 2.4) - 0.055
    } else {
        12.92 * v
    }
}

/// OKLab `[L, a, b]` of an sRGB colour.
pub fn rgb_to_oklab(c: Rgb) -> Vec3 {
    let linear = c.channels().map(srgb_to_linear);
    apply(&LMS_TO_LAB, apply(&RGB_TO_LMS, linear).map(f64::cbrt))
}

/// Linear sRGB (0–1, possibly outside) of an OKLab colour.
pub fn oklab_to_linear(lab: Vec3) -> Vec3 {
    apply(&LMS_TO_RGB, apply(&LAB_TO_LMS, lab).map(|v| v * v * v))
}

/// Linear sRGB to 8-bit sRGB, clipping what lies outside.
pub fn linear_to_rgb(linear: Vec3) -> Rgb {
    let [r, g, b] = linear.map(|v| (linear_to_srgb(v).clamp(0.0, 1.0) * 255.0).round() as u8);
    Rgb { r, g, b }
}

/// OKLab lightness of an sRGB colour (0–1).
pub fn oklab_lightness(c: Rgb) -> f64 {
    rgb_to_oklab(c)[0]
}

pub fn rgb_to_oklch(c: Rgb) -> Oklch {
    let [l, a, b] = rgb_to_oklab(c);
    Oklch {
        l,
        c: a.hypot(b),
        h: (b.atan2(a).to_degrees() + 360.0) % 360.0,
    }
}

/// An OKLCH colour in sRGB: as it is when it fits, else with the chroma lowered (same
/// lightness and hue) until it does.
pub fn oklch_to_rgb(c: Oklch) -> Rgb {
    let angle = c.h.to_radians();
    let (sin, cos) = angle.sin_cos();
    let at = |chroma: f64| oklab_to_linear([c.l, chroma * cos, chroma * sin]);
    let fits = |v: &Vec3| v.iter().all(|&x| (-1e-7..=1.0 + 1e-7).contains(&x));
    let direct = at(c.c);
    if fits(&direct) {
        return linear_to_rgb(direct);
    }
    // Bisect the chroma; grey (chroma 0) always fits, so it is where a hopeless case ends.
    let mut best = at(0.0);
    let (mut low, mut high) = (0.0, c.c);
    for _ in 0..20 {
        let mid = (low + high) / 2.0;
        let candidate = at(mid);
        if fits(&candidate) {
            low = mid;
            best = candidate;
        } else {
            high = mid;
        }
    }
    linear_to_rgb(best)
}

// OKHSL's lightness is OKLab's through a "toe" that spaces dark tones like CIELab does.
const TOE_K1: f64 = 0.206;
const TOE_K2: f64 = 0.03;
const TOE_K3: f64 = (1.0 + TOE_K1) / (1.0 + TOE_K2);

/// OKLab lightness to OKHSL lightness.
pub fn toe(x: f64) -> f64 {
    let k = TOE_K3 * x - TOE_K1;
    0.5 * (k + (k * k + 4.0 * TOE_K2 * TOE_K3 * x).sqrt())
}

/// OKHSL lightness to OKLab lightness.
pub fn toe_inv(x: f64) -> f64 {
    (x * x + TOE_K1 * x) / (TOE_K3 * (x + TOE_K2))
}

/// How each cube-root cone response changes along the chroma direction `(a, b)`.
fn lms_slopes(a: f64, b: f64) -> Vec3 {
    LAB_TO_LMS.map(|row| row[1] * a + row[2] * b)
}

/// The largest `chroma / lightness` sRGB holds at the hue `(a, b)` (a unit vector): which
/// channel clips first decides a polynomial estimate, which one Halley step refines.
fn max_saturation(a: f64, b: f64) -> f64 {
    // Per channel: the half-plane (`x·a + y·b > 1`) where it clips first, and the estimate's
    // coefficients. Blue is what is left.
    const FIT: [([f64; 2], [f64; 5]); 3] = [
        (
            [-1.881_703_1, -0.809_365_01],
            [
                1.190_862_77,
                1.765_767_28,
                0.596_626_41,
                0.755_151_97,
                0.567_712_45,
            ],
        ),
        (
            [1.814_440_8, -1.194_452_67],
            [
                0.739_565_15,
                -0.459_544_04,
                0.082_854_27,
                0.125_410_73,
                -0.145_032_04,
            ],
        ),
        (
            [0.131_107_58, 1.813_339_71],
            [
                1.357_336_52,
                -0.009_157_99,
                -1.151_302_1,
                -0.505_596_06,
                0.006_921_67,
            ],
        ),
    ];
    let channel = (0..2)
        .find(|&i| FIT[i].0[0] * a + FIT[i].0[1] * b > 1.0)
        .unwrap_or(2);
    let k = FIT[channel].1;
    let weights = LMS_TO_RGB[channel];
    let s = k[0] + k[1] * a + k[2] * b + k[3] * a * a + k[4] * a * b;
    let slopes = lms_slopes(a, b);
    let base = slopes.map(|k| 1.0 + s * k);
    let dot = |v: Vec3| weights[0] * v[0] + weights[1] * v[1] + weights[2] * v[2];
    let f = dot(base.map(|v| v * v * v));
    let f1 = dot([0, 1, 2].map(|i| 3.0 * slopes[i] * base[i] * base[i]));
    let f2 = dot([0, 1, 2].map(|i| 6.0 * slopes[i] * slopes[i] * base[i]));
    s - f * f1 / (f1 * f1 - 0.5 * f * f2)
}

/// OKLab lightness and chroma of the most colourful sRGB colour at the hue `(a, b)`.
fn cusp(a: f64, b: f64) -> (f64, f64) {
    let s = max_saturation(a, b);
    let rgb = oklab_to_linear([1.0, s * a, s * b]);
    let l = (1.0 / rgb[0].max(rgb[1]).max(rgb[2])).cbrt();
    (l, l * s)
}

/// The chroma at which the line of constant `lightness` at hue `(a, b)` leaves sRGB.
fn max_chroma(a: f64, b: f64, lightness: f64, (cusp_l, cusp_c): (f64, f64)) -> f64 {
    if lightness <= cusp_l {
        // Below the cusp the boundary is the straight line to black.
        return cusp_c * lightness / cusp_l;
    }
    // Above it: the straight line to white as a first guess, refined by one Halley step
    // against each channel reaching 1; the closest channel wins.
    let t = cusp_c * (lightness - 1.0) / (cusp_l - 1.0);
    let slopes = lms_slopes(a, b);
    let lms = slopes.map(|k| lightness + t * k);
    let cubes = lms.map(|v| v * v * v);
    let first = [0, 1, 2].map(|i| 3.0 * slopes[i] * lms[i] * lms[i]);
    let second = [0, 1, 2].map(|i| 6.0 * slopes[i] * slopes[i] * lms[i]);
    let dot = |row: &[f64; 3], v: &Vec3| row[0] * v[0] + row[1] * v[1] + row[2] * v[2];
    let step = LMS_TO_RGB
        .iter()
        .map(|row| {
            let f = dot(row, &cubes) - 1.0;
            let f1 = dot(row, &first);
            let f2 = dot(row, &second);
            let u = f1 / (f1 * f1 - 0.5 * f * f2);
            if u >= 0.0 {
                -f * u
            } else {
                f64::MAX
            }
        })
        .fold(f64::MAX, f64::min);
    t + step
}

/// The chroma OKHSL saturation 0.8 and 1 stand for at lightness `l` and hue `(a, b)`, and
/// the one shaping the curve below 0.8: `[c0, c_mid, c_max]`.
fn chroma_stops(l: f64, a: f64, b: f64) -> [f64; 3] {
    let peak = cusp(a, b);
    let c_max = max_chroma(a, b, l, peak);
    let (peak_s, peak_t) = (peak.1 / peak.0, peak.1 / (1.0 - peak.0));
    let k = c_max / (l * peak_s).min((1.0 - l) * peak_t);
    // A smooth estimate of the cusp's shape, so mid saturations look even across hues.
    let mid_s = 0.115_169_93
        + 1.0
            / (7.447_789_7
                + 4.159_012_4 * b
                + a * (-2.195_573_47
                    + 1.751_984_01 * b
                    + a * (-2.137_049_48 - 10.023_010_43 * b
                        + a * (-4.248_945_61 + 5.387_708_19 * b + 4.698_910_13 * a))));
    let mid_t = 0.112_396_42
        + 1.0
            / (1.613_203_2 - 0.681_243_79 * b
                + a * (0.403_706_12
                    + 0.901_481_23 * b
                    + a * (-0.270_879_43
                        + 0.612_239_9 * b
                        + a * (0.002_992_15 - 0.453_995_68 * b - 0.146_618_72 * a))));
    let c_mid = 0.9
        * k
        * (1.0 / (1.0 / (l * mid_s).powi(4) + 1.0 / ((1.0 - l) * mid_t).powi(4)))
            .sqrt()
            .sqrt();
    let c0 = (1.0 / (1.0 / (l * 0.4).powi(2) + 1.0 / ((1.0 - l) * 0.8).powi(2))).sqrt();
    [c0, c_mid, c_max]
}

/// OKHSL to sRGB (rounded, clipped). `h` in degrees, `s` and `l` 0–1.
pub fn okhsl_to_rgb(h: f64, s: f64, l: f64) -> Rgb {
    let lightness = toe_inv(l);
    let mut lab = [lightness, 0.0, 0.0];
    if lightness > 0.0 && lightness < 1.0 && s > 0.0 {
        let angle = 2.0 * PI * (h.rem_euclid(360.0)) / 360.0;
        let (b, a) = angle.sin_cos();
        let [c0, c_mid, c_max] = chroma_stops(lightness, a, b);
        // Chroma climbs from 0 through c_mid at saturation 0.8 to c_max at 1, along two
        // rational curves that meet smoothly.
        let chroma = if s < 0.8 {
            let t = 1.25 * s;
            let k1 = 0.8 * c0;
            t * k1 / (1.0 - (1.0 - k1 / c_mid) * t)
        } else {
            let t = 5.0 * (s - 0.8);
            let k1 = 0.2 * c_mid * c_mid * 1.25 * 1.25 / c0;
            c_mid + t * k1 / (1.0 - (1.0 - k1 / (c_max - c_mid)) * t)
        };
        lab = [lightness, chroma * a, chroma * b];
    }
    linear_to_rgb(oklab_to_linear(lab))
}

/// sRGB to OKHSL (hue 0 and saturation 0 for greys, black and white).
pub fn rgb_to_okhsl(c: Rgb) -> Okhsl {
    let [big_l, a, b] = rgb_to_oklab(c);
    let chroma = a.hypot(b);
    let l = toe(big_l);
    if chroma < 1e-9 || l <= 0.0 || l >= 1.0 {
        return Okhsl { h: 0.0, s: 0.0, l };
    }
    let h = (b.atan2(a).to_degrees() + 360.0) % 360.0;
    let [c0, c_mid, c_max] = chroma_stops(big_l, a / chroma, b / chroma);
    // The inverses of the two curves in `okhsl_to_rgb`.
    let s = if chroma < c_mid {
        let k1 = 0.8 * c0;
        0.8 * (chroma / (k1 + (1.0 - k1 / c_mid) * chroma))
    } else {
        let k1 = 0.2 * c_mid * c_mid * 1.25 * 1.25 / c0;
        let over = chroma - c_mid;
        0.8 + 0.2 * (over / (k1 + (1.0 - k1 / (c_max - c_mid)) * over))
    };
    Okhsl {
        h,
        s: s.clamp(0.0, 1.0),
        l,
    }
}

/// WCAG 2 relative luminance (0–1).
pub fn relative_luminance(c: Rgb) -> f64 {
    let [r, g, b] = c.channels().map(srgb_to_linear);
    0.2126 * r + 0.7152 * g + 0.0722 * b
}

/// WCAG 2 contrast ratio of two colours, 1–21.
pub fn wcag_contrast(x: Rgb, y: Rgb) -> f64 {
    let (a, b) = (relative_luminance(x), relative_luminance(y));
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn expected() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/system-theme/expected.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn black_white_and_grey_have_known_coordinates() {
        let black = rgb_to_okhsl(Rgb::BLACK);
        assert_eq!((black.s, black.l), (0.0, 0.0));
        let white = rgb_to_oklab(Rgb::WHITE);
        assert!(
            close(white[0], 1.0, 1e-6) && close(white[1], 0.0, 1e-6),
            "{white:?}"
        );
        // The toe maps 0 and 1 to themselves and is inverted by `toe_inv`.
        assert!(close(toe(0.0), 0.0, 1e-12) && close(toe(1.0), 1.0, 1e-12));
        for x in [0.05, 0.3, 0.5, 0.77, 0.95] {
            assert!(close(toe_inv(toe(x)), x, 1e-12), "{x}");
        }
        // Greys have no chroma, so no hue or saturation, whatever their lightness.
        let grey = rgb_to_okhsl(Rgb::new(0x80, 0x80, 0x80));
        assert_eq!((grey.h, grey.s), (0.0, 0.0));
        assert_eq!(okhsl_to_rgb(123.0, 0.0, grey.l), Rgb::new(0x80, 0x80, 0x80));
        // Pure red sits at the edge of the gamut: OKHSL saturation 1.
        let red = rgb_to_okhsl(Rgb::new(255, 0, 0));
        assert!(close(red.s, 1.0, 1e-3), "{red:?}");
        assert_eq!(okhsl_to_rgb(red.h, red.s, red.l), Rgb::new(255, 0, 0));
    }

    #[test]
    fn conversions_match_pi() {
        let fixture = expected();
        for case in fixture["conversions"].as_array().unwrap() {
            let color = Rgb::from_hex(case["hex"].as_str().unwrap()).unwrap();
            let lab = rgb_to_oklab(color);
            for (i, want) in case["oklab"].as_array().unwrap().iter().enumerate() {
                let want = want.as_f64().unwrap();
                assert!(
                    close(lab[i], want, 1e-9),
                    "{color:?} oklab {lab:?} vs {case}"
                );
            }
            let hsl = rgb_to_okhsl(color);
            let want: Vec<f64> = case["okhsl"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert!(
                close(hsl.s, want[1], 1e-9) && close(hsl.l, want[2], 1e-9),
                "{color:?} okhsl {hsl:?} vs {want:?}"
            );
            if hsl.s > 0.0 {
                assert!(
                    close(hsl.h, want[0], 1e-7),
                    "{color:?} hue {hsl:?} vs {want:?}"
                );
            }
            // There and back again: the same colour.
            let back = okhsl_to_rgb(hsl.h, hsl.s, hsl.l);
            assert_eq!(back.hex(), case["back"].as_str().unwrap(), "{color:?}");
            assert_eq!(back, color, "round trip of {color:?}");
        }
        for case in fixture["okhsl"].as_array().unwrap() {
            let v: Vec<f64> = case["hsl"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(
                okhsl_to_rgb(v[0], v[1], v[2]).hex(),
                case["hex"].as_str().unwrap(),
                "okhsl {v:?}"
            );
        }
        for case in fixture["oklch"].as_array().unwrap() {
            let v: Vec<f64> = case["lch"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let got = oklch_to_rgb(Oklch {
                l: v[0],
                c: v[1],
                h: v[2],
            });
            assert_eq!(got.hex(), case["hex"].as_str().unwrap(), "oklch {v:?}");
        }
        for case in fixture["contrast"].as_array().unwrap() {
            let a = Rgb::from_hex(case["a"].as_str().unwrap()).unwrap();
            let b = Rgb::from_hex(case["b"].as_str().unwrap()).unwrap();
            let want = case["ratio"].as_f64().unwrap();
            assert!(close(wcag_contrast(a, b), want, 1e-9), "{a:?} {b:?}");
        }
    }

    #[test]
    fn contrast_extremes() {
        assert!(close(wcag_contrast(Rgb::WHITE, Rgb::BLACK), 21.0, 1e-9));
        assert!(close(wcag_contrast(Rgb::BLACK, Rgb::BLACK), 1.0, 1e-12));
        // Symmetric.
        let (a, b) = (Rgb::new(0x1e, 0x1e, 0x2e), Rgb::new(0xcd, 0xd6, 0xf4));
        assert_eq!(wcag_contrast(a, b), wcag_contrast(b, a));
    }

    #[test]
    fn out_of_gamut_oklch_keeps_lightness_and_hue() {
        // Far more chroma than sRGB has at this hue: the result is the most colourful
        // colour that fits, at the asked lightness and hue.
        let asked = Oklch {
            l: 0.6,
            c: 0.5,
            h: 140.0,
        };
        let got = rgb_to_oklch(oklch_to_rgb(asked));
        assert!(close(got.l, 0.6, 0.01), "{got:?}");
        assert!(close(got.h, 140.0, 2.0), "{got:?}");
        assert!(got.c < 0.5);
    }
}
