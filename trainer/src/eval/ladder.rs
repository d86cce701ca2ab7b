//! Strength during training: every few checkpoints the newest plays the
//! baseline players (the Elo ladder), and with gating on each checkpoint must
//! beat the best one so far before self-play uses it. Matches run on their
//! own thread with their own inference server, so self-play goes on.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Result;
use engine::mcts::SearchConfig;
use engine::{at_least_one, check, InvalidKey};
use serde::{Deserialize, Serialize};

use crate::eval::arena::{self, Budget, Entrant, MatchSpec, Openings, PlayerSpec, Summary};
use crate::eval::rating::{MatchRecord, CHECKPOINT_PREFIX};
use crate::metrics::open_jsonl;
use crate::run_dir::Checkpoints;
use crate::training::state::read_progress;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationConfig {
    /// Rate every this many checkpoints against the baselines (0 = never).
    pub ladder_every: u32,
    /// The baselines: random, greedy or alphabeta:DEPTH.
    pub baselines: Vec<String>,
    /// Games against each baseline.
    pub ladder_games: usize,
    /// Promote a checkpoint to self-play only when it beats the best so far.
    pub gating: bool,
    /// Games of a gating match...
    pub gate_games: usize,
    /// ...and the score the candidate needs, above which it is promoted.
    pub gate_threshold: f64,
    /// Playouts per move of the networks.
    pub playouts: u32,
    /// Games played at once.
    pub concurrency: usize,
    /// Plies after which a game is a draw.
    pub max_plies: usize,
}

impl EvaluationConfig {
    pub fn validate(&self) -> Result<(), InvalidKey> {
        engine::players::check_specs("baselines", &self.baselines)?;
        check(
            self.ladder_every == 0 || (self.ladder_games >= 1 && !self.baselines.is_empty()),
            "ladder_games",
            || "a ladder needs ladder_games >= 1 and a baseline".into(),
        )?;
        check(!self.gating || self.gate_games >= 1, "gate_games", || {
            "gating needs gate_games >= 1".into()
        })?;
        check(
            (0.0..1.0).contains(&self.gate_threshold),
            "gate_threshold",
            || format!("{} (expected 0 <= threshold < 1)", self.gate_threshold),
        )?;
        at_least_one("playouts", self.playouts)?;
        at_least_one("concurrency", self.concurrency)?;
        at_least_one("max_plies", self.max_plies)
    }

    pub fn active(&self) -> bool {
        self.ladder_every > 0 || self.gating
    }
}

/// Work for the evaluation thread.
pub enum Job {
    /// Rate `checkpoint` (written at `step`) against every baseline.
    Rate { checkpoint: u32, step: u64 },
    /// Play `candidate` against `best`.
    Gate {
        candidate: u32,
        best: u32,
        step: u64,
    },
}

/// What a finished job found.
pub enum Report {
    Rated {
        checkpoint: u32,
        step: u64,
        baseline: String,
        summary: Summary,
    },
    Gated {
        candidate: u32,
        best: u32,
        step: u64,
        summary: Summary,
    },
    Failed {
        gating: bool,
        why: String,
    },
}

/// The evaluation thread. Dropping it cancels a match in progress (its
/// results are only metrics) and waits for the thread: libtorch must not be
/// running on it while the process exits.
pub struct Evaluations {
    jobs: Option<Sender<Job>>,
    reports: Receiver<Report>,
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Evaluations {
    /// Starts the evaluation thread; its networks play with the run's
    /// `search` settings.
    /// Each match's result is appended to `matches` (`mixzero rate` reads it).
    pub fn start(
        config: EvaluationConfig,
        search: SearchConfig,
        checkpoints: Checkpoints,
        matches: PathBuf,
        seed: u64,
    ) -> Evaluations {
        let log = MatchLog {
            path: matches,
            checkpoints: checkpoints.clone(),
        };
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (report_tx, reports) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::clone(&cancel);
        let thread = std::thread::spawn(move || {
            for (round, job) in job_rx.into_iter().enumerate() {
                if cancelled.load(Ordering::Relaxed) {
                    return;
                }
                let seed = seed.wrapping_add(round as u64);
                let sent = match job {
                    Job::Rate { checkpoint, step } => config.baselines.iter().all(|baseline| {
                        let players = [
                            network(&checkpoints, checkpoint, &config, &search),
                            Entrant {
                                name: baseline.clone(),
                                player: PlayerSpec::Builtin(baseline.clone()),
                            },
                        ];
                        let played = play(&config, players, config.ladder_games, seed, &cancelled);
                        if let Ok(summary) = &played {
                            log.append(checkpoint, baseline.clone(), summary);
                        }
                        let report = report(played, false, |summary| Report::Rated {
                            checkpoint,
                            step,
                            baseline: baseline.clone(),
                            summary,
                        });
                        report_tx.send(report).is_ok()
                    }),
                    Job::Gate {
                        candidate,
                        best,
                        step,
                    } => {
                        let players = [
                            network(&checkpoints, candidate, &config, &search),
                            network(&checkpoints, best, &config, &search),
                        ];
                        let played = play(&config, players, config.gate_games, seed, &cancelled);
                        if let Ok(summary) = &played {
                            log.append(candidate, MatchLog::name(best), summary);
                        }
                        let report = report(played, true, |summary| Report::Gated {
                            candidate,
                            best,
                            step,
                            summary,
                        });
                        report_tx.send(report).is_ok()
                    }
                };
                if !sent {
                    return;
                }
            }
        });
        Evaluations {
            jobs: Some(jobs),
            reports,
            cancel,
            thread: Some(thread),
        }
    }

    pub fn submit(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // The thread only goes away when this is dropped.
            let _ = jobs.send(job);
        }
    }

    /// Reports that arrived since the last call.
    pub fn reports(&self) -> Vec<Report> {
        self.reports.try_iter().collect()
    }
}

/// A checkpoint searched with the run's own settings, named by the
/// `mixzero arena --player` spec that plays it the same way.
fn network(
    checkpoints: &Checkpoints,
    checkpoint: u32,
    config: &EvaluationConfig,
    search: &SearchConfig,
) -> Entrant {
    let weights = checkpoints.weights(checkpoint);
    Entrant {
        name: arena::network_spec(&weights, config.playouts, search),
        player: PlayerSpec::Network {
            weights,
            budget: Budget::Playouts(config.playouts),
            search: *search,
        },
    }
}

impl Drop for Evaluations {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The run's ladder and gating results, one [`MatchRecord`] a line.
struct MatchLog {
    path: PathBuf,
    checkpoints: Checkpoints,
}

impl MatchLog {
    fn name(checkpoint: u32) -> String {
        format!("{CHECKPOINT_PREFIX}{checkpoint:06}")
    }

    /// Hours the run had trained when `checkpoint` was written, as its
    /// counters record them. Runs begun before they did fall back on the
    /// times the checkpoint files were written, which also count the pauses
    /// between sessions and restart at a copy of the run directory.
    fn hours(&self, checkpoint: u32) -> Option<f64> {
        let recorded = read_progress(&self.checkpoints, checkpoint)
            .ok()
            .and_then(|p| p.seconds);
        if let Some(seconds) = recorded {
            return Some(seconds / 3600.0);
        }
        let written = |n| {
            std::fs::metadata(self.checkpoints.weights(n))
                .and_then(|m| m.modified())
                .ok()
        };
        let seconds = written(checkpoint)?.duration_since(written(0)?).ok()?;
        Some(seconds.as_secs_f64() / 3600.0)
    }

    /// Appends a result; a failure costs only the rating, so it is logged.
    fn append(&self, checkpoint: u32, opponent: String, summary: &Summary) {
        let record = MatchRecord {
            player1: MatchLog::name(checkpoint),
            player2: opponent,
            wins: summary.wins,
            draws: summary.draws,
            losses: summary.losses,
            hours: self.hours(checkpoint),
        };
        let written = serde_json::to_string(&record)
            .map_err(std::io::Error::other)
            .and_then(|line| {
                let mut file = open_jsonl(&self.path)?;
                file.write_all(format!("{line}\n").as_bytes())?;
                file.flush()
            });
        if let Err(e) = written {
            tracing::warn!("cannot log a match to {}: {e}", self.path.display());
        }
    }
}

/// A match's report, or its error as a failure.
fn report(played: Result<Summary>, gating: bool, done: impl FnOnce(Summary) -> Report) -> Report {
    match played {
        Ok(summary) => done(summary),
        Err(e) => Report::Failed {
            gating,
            why: format!("{e:#}"),
        },
    }
}

fn play(
    config: &EvaluationConfig,
    entrants: [Entrant; 2],
    games: usize,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<Summary> {
    let spec = MatchSpec {
        entrants,
        games,
        concurrency: config.concurrency,
        // One libtorch thread: a second OpenMP team would stall self-play's.
        threads: Some(1),
        precision: models::Precision::Auto,
        seed,
        max_plies: config.max_plies,
        openings: Openings::Book,
        sprt: None,
        pgn_out: None,
    };
    arena::play_match(&spec, cancel, |_| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::state::tiny_state;

    #[test]
    fn hours_are_the_recorded_training_time_else_the_file_times() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(dir.path());
        let mut state = tiny_state();
        state.save_checkpoint(&checkpoints).unwrap();
        // Written a moment after checkpoint 0, as a copied run directory's
        // files all are, yet an hour and a half of training later.
        state.progress.checkpoint = 1;
        state.progress.seconds = Some(5400.0);
        state.save_checkpoint(&checkpoints).unwrap();
        let log = MatchLog {
            path: dir.path().join("matches.jsonl"),
            checkpoints: checkpoints.clone(),
        };
        assert_eq!(log.hours(0), Some(0.0));
        assert_eq!(log.hours(1), Some(1.5));
        // A checkpoint of a run begun before the seconds were recorded.
        state.progress.checkpoint = 2;
        state.progress.seconds = None;
        state.save_checkpoint(&checkpoints).unwrap();
        let by_file_times = log.hours(2).unwrap();
        assert!((0.0..0.1).contains(&by_file_times), "{by_file_times}");
    }
}
