//! One Elo scale for every player: a Bradley–Terry pool rating over match
//! results (ladder matches, arena summaries), fitted by maximum a
//! posteriori with a BayesElo-style prior, and anchored so that `random`
//! is 0. Ratings from different runs and configs then compare on one axis,
//! which per-match Elo differences (each against its own opponent) do not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The player every scale is anchored to.
pub const ANCHOR: &str = "random";

/// Where a run's ladder and gating matches are logged, one record a line.
pub const MATCHES_FILE: &str = "matches.jsonl";
/// How a run's log names a checkpoint; `mixzero rate` puts the run's name
/// before it so that checkpoints of different runs stay apart.
pub const CHECKPOINT_PREFIX: &str = "checkpoint ";

/// Virtual draws added to every pairing that played: they keep a player
/// that won or lost every game at a finite rating (BayesElo's prior).
const PRIOR_DRAWS: f64 = 2.0;
/// Elo per natural-log unit of strength.
const ELO_PER_NAT: f64 = 400.0 / std::f64::consts::LN_10;

/// Wins, draws and losses of `player1` against `player2`. An arena
/// `--json` summary reads as one (its other fields are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchRecord {
    pub player1: String,
    pub player2: String,
    pub wins: u32,
    pub draws: u32,
    pub losses: u32,
    /// Hours of training behind `player1` (a checkpoint), for the plot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<f64>,
}

/// A player's place on the scale.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rating {
    pub player: String,
    pub elo: f64,
    /// 95% interval, from the curvature of the fit at its maximum.
    pub elo_ci95: [f64; 2],
    pub games: u32,
    /// Hours of training behind the player, when a record said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hours: Option<f64>,
}

#[derive(Debug, Error, PartialEq)]
pub enum RatingError {
    #[error("no games to rate")]
    NoGames,
    #[error("`{ANCHOR}` played no game: the scale needs it at 0 (add matches against random)")]
    NoAnchor,
    #[error(
        "no chain of games links {} to `{ANCHOR}`, so they have no place on its scale",
        .0.join(", ")
    )]
    Disconnected(Vec<String>),
    #[error("a player cannot play itself: {0}")]
    SelfPlay(String),
}

#[derive(Debug, Error)]
pub enum ReadError {
    #[error("reading {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: not a match record: {source}", .path.display())]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

/// The match records of a JSON-lines file (a run's `logs/matches.jsonl`, or
/// arena `--json` summaries collected in a file).
pub fn read_records(path: &Path) -> Result<Vec<MatchRecord>, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|source| ReadError::Json {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// A run's logged matches, its checkpoints named `LABEL checkpoint NNNNNN`.
pub fn run_records(logs: &Path, label: &str) -> Result<Vec<MatchRecord>, ReadError> {
    let mut records = read_records(&logs.join(MATCHES_FILE))?;
    for r in &mut records {
        for name in [&mut r.player1, &mut r.player2] {
            if name.starts_with(CHECKPOINT_PREFIX) {
                *name = format!("{label} {name}");
            }
        }
    }
    Ok(records)
}

/// Fits every player of `records` on one scale with `random` at 0.
pub fn rate(records: &[MatchRecord]) -> Result<Vec<Rating>, RatingError> {
    let mut index = BTreeMap::new();
    for r in records {
        if r.player1 == r.player2 {
            return Err(RatingError::SelfPlay(r.player1.clone()));
        }
        for name in [&r.player1, &r.player2] {
            let next = index.len();
            index.entry(name.clone()).or_insert(next);
        }
    }
    let names: Vec<String> = {
        let mut names = vec![String::new(); index.len()];
        for (name, &i) in &index {
            names[i] = name.clone();
        }
        names
    };
    let n = names.len();
    if records.iter().all(|r| r.wins + r.draws + r.losses == 0) {
        return Err(RatingError::NoGames);
    }
    let anchor = *index.get(ANCHOR).ok_or(RatingError::NoAnchor)?;

    // Points scored and games played by each pair, draws as half a point,
    // with the prior's virtual draws on every pair that met.
    let mut points = vec![vec![0.0; n]; n];
    let mut games = vec![vec![0.0; n]; n];
    let mut played = vec![0u32; n];
    let mut hours: Vec<Option<f64>> = vec![None; n];
    for r in records {
        let (a, b) = (index[&r.player1], index[&r.player2]);
        let total = r.wins + r.draws + r.losses;
        if total == 0 {
            continue;
        }
        points[a][b] += r.wins as f64 + 0.5 * r.draws as f64;
        points[b][a] += r.losses as f64 + 0.5 * r.draws as f64;
        games[a][b] += total as f64;
        games[b][a] += total as f64;
        played[a] += total;
        played[b] += total;
        if r.hours.is_some() {
            hours[a] = r.hours;
        }
    }
    for a in 0..n {
        for b in 0..n {
            if games[a][b] > 0.0 {
                points[a][b] += PRIOR_DRAWS / 2.0;
                games[a][b] += PRIOR_DRAWS;
            }
        }
    }
    let unlinked = unreachable_from(anchor, &games);
    if !unlinked.is_empty() {
        return Err(RatingError::Disconnected(
            unlinked.into_iter().map(|i| names[i].clone()).collect(),
        ));
    }

    // Hunter's MM iterations for Bradley–Terry strengths gamma_i:
    // gamma_i <- W_i / sum_j n_ij / (gamma_i + gamma_j). Each step raises
    // the posterior; with the prior every W_i > 0, so all stay positive.
    let wins: Vec<f64> = points.iter().map(|row| row.iter().sum()).collect();
    let mut gamma = vec![1.0f64; n];
    for _ in 0..10_000 {
        let mut next = vec![0.0; n];
        for i in 0..n {
            let denominator: f64 = (0..n)
                .filter(|&j| games[i][j] > 0.0)
                .map(|j| games[i][j] / (gamma[i] + gamma[j]))
                .sum();
            next[i] = wins[i] / denominator;
        }
        let scale = next[anchor];
        let mut change = 0f64;
        for i in 0..n {
            let g = next[i] / scale;
            change = change.max((g.ln() - gamma[i].ln()).abs());
            gamma[i] = g;
        }
        if change < 1e-10 {
            break;
        }
    }
    let theta: Vec<f64> = gamma.iter().map(|g| g.ln()).collect();
    let sigma = standard_errors(&theta, &games, anchor);
    Ok((0..n)
        .map(|i| {
            let elo = theta[i] * ELO_PER_NAT;
            let half = 1.96 * sigma[i] * ELO_PER_NAT;
            Rating {
                player: names[i].clone(),
                elo,
                elo_ci95: [elo - half, elo + half],
                games: played[i],
                hours: hours[i],
            }
        })
        .collect())
}

/// Players with no chain of games to `start`.
fn unreachable_from(start: usize, games: &[Vec<f64>]) -> Vec<usize> {
    let n = games.len();
    let mut seen = vec![false; n];
    let mut stack = vec![start];
    seen[start] = true;
    while let Some(i) = stack.pop() {
        for j in 0..n {
            if games[i][j] > 0.0 && !seen[j] {
                seen[j] = true;
                stack.push(j);
            }
        }
    }
    (0..n).filter(|&i| !seen[i]).collect()
}

/// Standard errors of log-strengths, the anchor's fixed at 0: the square
/// roots of the diagonal of the inverse Fisher information (the negative
/// Hessian of the log-likelihood) with the anchor's row and column removed.
fn standard_errors(theta: &[f64], games: &[Vec<f64>], anchor: usize) -> Vec<f64> {
    let free: Vec<usize> = (0..theta.len()).filter(|&i| i != anchor).collect();
    let m = free.len();
    let mut info = vec![vec![0.0; m]; m];
    for (a, &i) in free.iter().enumerate() {
        for j in 0..theta.len() {
            if i == j || games[i][j] == 0.0 {
                continue;
            }
            let p = 1.0 / (1.0 + (theta[j] - theta[i]).exp());
            let w = games[i][j] * p * (1.0 - p);
            info[a][a] += w;
            if let Some(b) = free.iter().position(|&f| f == j) {
                info[a][b] -= w;
            }
        }
    }
    let inverse_diagonal = invert_diagonal(info);
    let mut sigma = vec![0.0; theta.len()];
    for (a, &i) in free.iter().enumerate() {
        sigma[i] = inverse_diagonal[a].max(0.0).sqrt();
    }
    sigma
}

/// The diagonal of the inverse of a symmetric positive definite matrix,
/// by Gauss–Jordan elimination (pools are small: tens of players).
fn invert_diagonal(mut a: Vec<Vec<f64>>) -> Vec<f64> {
    let m = a.len();
    let mut inv: Vec<Vec<f64>> = (0..m)
        .map(|i| (0..m).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    for col in 0..m {
        let pivot = (col..m)
            .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let p = a[col][col];
        if p.abs() < 1e-300 {
            continue;
        }
        for j in 0..m {
            a[col][j] /= p;
            inv[col][j] /= p;
        }
        for row in 0..m {
            if row != col {
                let f = a[row][col];
                if f != 0.0 {
                    for j in 0..m {
                        a[row][j] -= f * a[col][j];
                        inv[row][j] -= f * inv[col][j];
                    }
                }
            }
        }
    }
    (0..m).map(|i| inv[i][i]).collect()
}

/// An SVG plot of Elo against hours of training, one point per rated
/// checkpoint (with its interval) and a dashed line per baseline.
pub fn plot_svg(ratings: &[Rating]) -> String {
    const W: f64 = 640.0;
    const H: f64 = 400.0;
    const PAD: f64 = 50.0;
    let points: Vec<&Rating> = ratings.iter().filter(|r| r.hours.is_some()).collect();
    let baselines: Vec<&Rating> = ratings.iter().filter(|r| r.hours.is_none()).collect();
    let max_hours = points
        .iter()
        .filter_map(|r| r.hours)
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let (lo, hi) = ratings.iter().fold((0.0f64, 100.0f64), |(lo, hi), r| {
        (lo.min(r.elo_ci95[0]), hi.max(r.elo_ci95[1]))
    });
    let x = |h: f64| PAD + (W - 2.0 * PAD) * h / max_hours;
    let y = |e: f64| H - PAD - (H - 2.0 * PAD) * (e - lo) / (hi - lo).max(1.0);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <line x1=\"{PAD}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <text x=\"{cx}\" y=\"{t}\" text-anchor=\"middle\">hours of training</text>\n\
         <text x=\"12\" y=\"{PAD}\">Elo (random = 0)</text>\n\
         <text x=\"{PAD}\" y=\"{t2}\" text-anchor=\"middle\">0</text>\n\
         <text x=\"{r}\" y=\"{t2}\" text-anchor=\"middle\">{max_hours:.2}</text>\n\
         <text x=\"{l}\" y=\"{ylo}\" text-anchor=\"end\">{lo:.0}</text>\n\
         <text x=\"{l}\" y=\"{yhi}\" text-anchor=\"end\">{hi:.0}</text>\n",
        b = H - PAD,
        r = W - PAD,
        cx = W / 2.0,
        t = H - 12.0,
        t2 = H - PAD + 14.0,
        l = PAD - 4.0,
        ylo = y(lo),
        yhi = y(hi),
    );
    for base in &baselines {
        svg.push_str(&format!(
            "<line x1=\"{PAD}\" y1=\"{e:.1}\" x2=\"{r}\" y2=\"{e:.1}\" stroke=\"grey\" \
             stroke-dasharray=\"4 3\"/>\n<text x=\"{r}\" y=\"{t:.1}\" text-anchor=\"end\" \
             fill=\"grey\">{name}</text>\n",
            e = y(base.elo),
            r = W - PAD,
            t = y(base.elo) - 3.0,
            name = xml_escape(&base.player),
        ));
    }
    for p in &points {
        let h = p.hours.unwrap_or(0.0);
        svg.push_str(&format!(
            "<line x1=\"{px:.1}\" y1=\"{a:.1}\" x2=\"{px:.1}\" y2=\"{b:.1}\" stroke=\"steelblue\"/>\n\
             <circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3\" fill=\"steelblue\">\
             <title>{name}: {elo:.0}</title></circle>\n",
            px = x(h),
            py = y(p.elo),
            a = y(p.elo_ci95[0]),
            b = y(p.elo_ci95[1]),
            name = xml_escape(&p.player),
            elo = p.elo,
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(one: &str, two: &str, wins: u32, draws: u32, losses: u32) -> MatchRecord {
        MatchRecord {
            player1: one.into(),
            player2: two.into(),
            wins,
            draws,
            losses,
            hours: None,
        }
    }

    fn elo(ratings: &[Rating], name: &str) -> f64 {
        ratings.iter().find(|r| r.player == name).unwrap().elo
    }

    #[test]
    fn a_pair_matches_the_logistic_formula() {
        // 75% over 100 games is 400·log10(3) = 190.8 Elo; the prior's two
        // draws shrink it a little: 76 of 102 points, 186.3.
        let ratings = rate(&[record("net", "random", 70, 10, 20)]).unwrap();
        assert_eq!(elo(&ratings, "random"), 0.0);
        let expected = 400.0 * (76f64 / 26.0).log10();
        assert!(
            (elo(&ratings, "net") - expected).abs() < 1e-6,
            "{ratings:?}"
        );
        let r = ratings.iter().find(|r| r.player == "net").unwrap();
        assert!(r.elo_ci95[0] < r.elo && r.elo < r.elo_ci95[1]);
        assert_eq!(r.games, 100);
    }

    #[test]
    fn transitive_pools_line_up_and_sweeps_stay_finite() {
        let ratings = rate(&[
            record("a", "random", 100, 0, 0),
            record("b", "a", 60, 20, 20),
            record("b", "greedy", 50, 0, 50),
        ])
        .unwrap();
        let (a, b, greedy) = (
            elo(&ratings, "a"),
            elo(&ratings, "b"),
            elo(&ratings, "greedy"),
        );
        assert!(a.is_finite() && a > 400.0, "{ratings:?}");
        assert!(b > a && (greedy - b).abs() < 1.0, "{ratings:?}");
        // A player rated only through others has a wider interval.
        let width = |name: &str| {
            let r = ratings.iter().find(|r| r.player == name).unwrap();
            r.elo_ci95[1] - r.elo_ci95[0]
        };
        assert!(width("greedy") > width("b"));
    }

    #[test]
    fn more_games_narrow_the_interval() {
        let width = |n: u32| {
            let ratings = rate(&[record("net", "random", 3 * n, 0, n)]).unwrap();
            let r = ratings.iter().find(|r| r.player == "net").unwrap().clone();
            r.elo_ci95[1] - r.elo_ci95[0]
        };
        assert!(width(100) < width(10) / 2.5);
    }

    #[test]
    fn pools_that_cannot_be_anchored_are_errors() {
        assert_eq!(
            rate(&[record("a", "b", 1, 0, 0)]),
            Err(RatingError::NoAnchor)
        );
        assert_eq!(
            rate(&[record("a", "random", 1, 0, 0), record("b", "c", 1, 0, 0)]),
            Err(RatingError::Disconnected(vec!["b".into(), "c".into()]))
        );
        assert_eq!(
            rate(&[record("random", "a", 0, 0, 0)]),
            Err(RatingError::NoGames)
        );
        assert_eq!(
            rate(&[record("random", "random", 1, 0, 0)]),
            Err(RatingError::SelfPlay("random".into()))
        );
    }

    #[test]
    fn an_arena_summary_reads_as_a_record() {
        let line = r#"{"player1":"run:playouts=100","player2":"random","games":4,"wins":3,
            "draws":1,"losses":0,"score":0.875,"elo":338.0,"elo_ci95":[1.0,2.0],
            "forfeits":0,"eval_failures":0,"seconds":1.5}"#;
        let r: MatchRecord = serde_json::from_str(line).unwrap();
        assert_eq!((r.wins, r.draws, r.losses, r.hours), (3, 1, 0, None));
    }

    #[test]
    fn run_logs_name_their_checkpoints_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = record("checkpoint 000004", "random", 9, 1, 0);
        first.hours = Some(0.25);
        let lines = [
            first,
            record("checkpoint 000008", "checkpoint 000004", 6, 2, 2),
        ]
        .map(|r| serde_json::to_string(&r).unwrap());
        std::fs::write(dir.path().join(MATCHES_FILE), lines.join("\n") + "\n\n").unwrap();
        let records = run_records(dir.path(), "s1").unwrap();
        assert_eq!(records[0].player1, "s1 checkpoint 000004");
        assert_eq!(records[0].hours, Some(0.25));
        assert_eq!(records[1].player2, "s1 checkpoint 000004");
        assert_eq!(records[0].player2, "random");

        std::fs::write(
            dir.path().join(MATCHES_FILE),
            lines[0].clone() + "\n{oops\n",
        )
        .unwrap();
        let err = run_records(dir.path(), "s1").unwrap_err().to_string();
        assert!(err.contains("matches.jsonl:2: not a match record"), "{err}");
        let missing = read_records(&dir.path().join("none.jsonl")).unwrap_err();
        assert!(matches!(missing, ReadError::Io { .. }));
    }

    #[test]
    fn the_plot_names_its_points() {
        let mut ratings = rate(&[record("ckpt 1", "random", 8, 1, 1)]).unwrap();
        ratings[0].hours = Some(0.5);
        let svg = plot_svg(&ratings);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("<title>ckpt 1: "), "{svg}");
        assert!(svg.contains(">random</text>"), "{svg}");
    }
}
