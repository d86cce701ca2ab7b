//! Sequential probability ratio test on a match's wins, draws and losses.
//!
//! The model is the trinomial GSPRT with logistic Elo, as fishtest computes
//! for game (not game-pair) results: H0 says the expected score is
//! `s0 = 1 / (1 + 10^(-elo0 / 400))`, H1 says `s1` likewise from `elo1`. The
//! draw rate is a nuisance parameter, so each hypothesis takes the win/draw/
//! loss probabilities of the highest likelihood among those with its score
//! (a profile likelihood), and the log-likelihood ratio is
//! `sum over outcomes of count * ln(p1 / p0)`. The test accepts H1 when it
//! reaches `ln((1 - beta) / alpha)` and H0 when it falls to
//! `ln(beta / (1 - alpha))` (Wald's bounds).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use thiserror::Error;

/// The parameters of `--sprt elo0,elo1[,alpha,beta]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sprt {
    pub elo0: f64,
    pub elo1: f64,
    /// Probability of accepting H1 when H0 holds.
    pub alpha: f64,
    /// Probability of accepting H0 when H1 holds.
    pub beta: f64,
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum SprtError {
    #[error("expected elo0,elo1 or elo0,elo1,alpha,beta, got `{0}`")]
    Shape(String),
    #[error("`{0}` is not a number")]
    Number(String),
    #[error("elo0 ({elo0}) must be below elo1 ({elo1})")]
    Order { elo0: f64, elo1: f64 },
    #[error("alpha and beta must lie strictly between 0 and 0.5, got {alpha} and {beta}")]
    Error { alpha: f64, beta: f64 },
}

impl FromStr for Sprt {
    type Err = SprtError;

    fn from_str(text: &str) -> Result<Sprt, SprtError> {
        let numbers = text
            .split(',')
            .map(|part| {
                let part = part.trim();
                part.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| SprtError::Number(part.to_string()))
            })
            .collect::<Result<Vec<f64>, SprtError>>()?;
        let (elo0, elo1, alpha, beta) = match numbers[..] {
            [elo0, elo1] => (elo0, elo1, 0.05, 0.05),
            [elo0, elo1, alpha, beta] => (elo0, elo1, alpha, beta),
            _ => return Err(SprtError::Shape(text.to_string())),
        };
        if elo0 >= elo1 {
            return Err(SprtError::Order { elo0, elo1 });
        }
        // At 0.5 or more the bounds meet or cross and the test means nothing.
        let valid = |p: f64| p > 0.0 && p < 0.5;
        if !valid(alpha) || !valid(beta) {
            return Err(SprtError::Error { alpha, beta });
        }
        Ok(Sprt {
            elo0,
            elo1,
            alpha,
            beta,
        })
    }
}

/// Which hypothesis the test accepted, if any yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Decision {
    H0,
    H1,
    #[serde(rename = "none")]
    None,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::H0 => "H0",
            Decision::H1 => "H1",
            Decision::None => "none",
        })
    }
}

/// The state of the test, as printed and written to the JSON summary.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SprtReport {
    pub llr: f64,
    pub lower: f64,
    pub upper: f64,
    pub result: Decision,
}

/// Expected score at an Elo difference (logistic model).
pub fn score_from_elo(elo: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf(-elo / 400.0))
}

impl Sprt {
    /// Wald's bounds on the log-likelihood ratio: (lower, upper).
    pub fn bounds(&self) -> (f64, f64) {
        (
            (self.beta / (1.0 - self.alpha)).ln(),
            ((1.0 - self.beta) / self.alpha).ln(),
        )
    }

    /// ln(L(H1) / L(H0)) of `wins`, `draws`, `losses`; 0 with no games.
    pub fn llr(&self, wins: u32, draws: u32, losses: u32) -> f64 {
        let counts = [wins as f64, draws as f64, losses as f64];
        let p0 = profile_mle(counts, score_from_elo(self.elo0));
        let p1 = profile_mle(counts, score_from_elo(self.elo1));
        counts
            .iter()
            .zip(p0.iter().zip(p1.iter()))
            .filter(|(&n, _)| n > 0.0)
            .map(|(&n, (&a, &b))| n * (b / a).ln())
            .sum()
    }

    /// The LLR, the bounds, and the decision they give.
    pub fn report(&self, wins: u32, draws: u32, losses: u32) -> SprtReport {
        let llr = self.llr(wins, draws, losses);
        let (lower, upper) = self.bounds();
        let result = if llr >= upper {
            Decision::H1
        } else if llr <= lower {
            Decision::H0
        } else {
            Decision::None
        };
        SprtReport {
            llr,
            lower,
            upper,
            result,
        }
    }
}

/// The win/draw/loss probabilities with expected score `s` (in (0, 1)) that
/// make `counts` most likely.
///
/// With draw probability `d`, a score of `s` forces `pw = s - d/2` and
/// `pl = 1 - s - d/2`; the log-likelihood is concave in `d` on
/// `[0, min(2s, 2 - 2s)]`, so the root of its derivative is found by bisection
/// (the maximum sits on an end when that derivative keeps one sign).
fn profile_mle(counts: [f64; 3], s: f64) -> [f64; 3] {
    let [w, d, l] = counts;
    let probabilities = |draw: f64| [s - draw / 2.0, draw, 1.0 - s - draw / 2.0];
    let slope = |draw: f64| {
        let [pw, pd, pl] = probabilities(draw);
        // An outcome never seen adds nothing, whatever its probability.
        let term = |n: f64, p: f64| if n > 0.0 { n / p } else { 0.0 };
        -term(w, pw) / 2.0 + term(d, pd) - term(l, pl) / 2.0
    };
    let (mut low, mut high) = (0.0, 2.0 * s.min(1.0 - s));
    if d == 0.0 {
        return probabilities(low);
    }
    if w == 0.0 && l == 0.0 {
        return probabilities(high);
    }
    // 100 halvings of an interval no wider than 1 reach f64 precision.
    for _ in 0..100 {
        let mid = 0.5 * (low + high);
        if slope(mid) > 0.0 {
            low = mid;
        } else {
            high = mid;
        }
    }
    probabilities(0.5 * (low + high))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sprt(elo0: f64, elo1: f64) -> Sprt {
        Sprt {
            elo0,
            elo1,
            alpha: 0.05,
            beta: 0.05,
        }
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!("0,10".parse::<Sprt>().unwrap(), sprt(0.0, 10.0));
        assert_eq!(
            " -5, 5, 0.1, 0.2".parse::<Sprt>().unwrap(),
            Sprt {
                elo0: -5.0,
                elo1: 5.0,
                alpha: 0.1,
                beta: 0.2
            }
        );
        for (bad, expected) in [
            ("0", "expected elo0,elo1"),
            ("0,1,0.05", "expected elo0,elo1"),
            ("0,x", "`x` is not a number"),
            ("0,inf", "`inf` is not a number"),
            ("10,0", "must be below"),
            ("5,5", "must be below"),
            ("0,10,0,0.05", "strictly between"),
            ("0,10,0.05,0.5", "strictly between"),
        ] {
            let err = bad.parse::<Sprt>().unwrap_err().to_string();
            assert!(err.contains(expected), "{bad}: {err}");
        }
    }

    #[test]
    fn bounds_are_walds() {
        let (lower, upper) = sprt(0.0, 5.0).bounds();
        assert!((lower + 2.944_438_98).abs() < 1e-8, "{lower}");
        assert!((upper - 2.944_438_98).abs() < 1e-8, "{upper}");
        let asymmetric = Sprt {
            alpha: 0.1,
            beta: 0.2,
            ..sprt(0.0, 5.0)
        };
        let (lower, upper) = asymmetric.bounds();
        assert!((lower - (0.2f64 / 0.9).ln()).abs() < 1e-12);
        assert!((upper - 8f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn llr_matches_hand_computed_figures() {
        // Reference values maximised over the draw rate by a separate
        // golden-section search (Python), to 1e-6.
        let cases = [
            // (elo0, elo1, W, D, L, LLR)
            (0.0, 10.0, 60, 80, 40, 0.903_819),
            (0.0, 5.0, 400, 300, 380, 0.243_691),
            (-10.0, 10.0, 10, 5, 25, -0.986_781),
            (0.0, 200.0, 12, 0, 0, 5.020_527),
            (0.0, 200.0, 0, 30, 0, -21.987_458),
        ];
        for (elo0, elo1, w, d, l, expected) in cases {
            let llr = sprt(elo0, elo1).llr(w, d, l);
            assert!((llr - expected).abs() < 1e-5, "{w} {d} {l}: {llr}");
        }
        // Without draws the best draw rate is 0: W ln(s1/s0) + L ln((1-s1)/(1-s0)).
        let (s0, s1) = (score_from_elo(0.0), score_from_elo(200.0));
        let expected = 7.0 * (s1 / s0).ln() + 2.0 * ((1.0 - s1) / (1.0 - s0)).ln();
        assert!((sprt(0.0, 200.0).llr(7, 0, 2) - expected).abs() < 1e-12);
        assert_eq!(sprt(0.0, 10.0).llr(0, 0, 0), 0.0);
    }

    #[test]
    fn llr_approaches_the_normal_approximation() {
        // For many games and small Elo gaps, LLR ~ N (s1-s0)(2s-s0-s1) / (2 var).
        let (w, d, l) = (3100u32, 4000u32, 2900u32);
        let n = (w + d + l) as f64;
        let s = (w as f64 + 0.5 * d as f64) / n;
        let var =
            (w as f64 * (1.0 - s).powi(2) + d as f64 * (0.5 - s).powi(2) + l as f64 * s.powi(2))
                / n;
        let (s0, s1) = (score_from_elo(0.0), score_from_elo(5.0));
        let approx = n * (s1 - s0) * (2.0 * s - s0 - s1) / (2.0 * var);
        let llr = sprt(0.0, 5.0).llr(w, d, l);
        assert!((llr - approx).abs() < 0.02 * approx.abs(), "{llr} {approx}");
    }

    #[test]
    fn decisions_follow_the_evidence() {
        let test = sprt(0.0, 200.0);
        assert_eq!(test.report(2, 0, 0).result, Decision::None);
        assert_eq!(test.report(12, 0, 0).result, Decision::H1);
        assert_eq!(test.report(0, 0, 12).result, Decision::H0);
        // Only draws: a score of 0.5 fits H0 exactly.
        let report = test.report(0, 30, 0);
        assert!(report.llr < 0.0);
        assert_eq!(report.result, Decision::H0);
        assert_eq!(
            serde_json::to_value(test.report(1, 1, 1)).unwrap()["result"],
            "none"
        );
    }
}
