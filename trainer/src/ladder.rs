//! Strength during training: every few checkpoints the newest plays the
//! baseline players (the Elo ladder), and with gating on each checkpoint must
//! beat the best one so far before self-play uses it. Matches run on their
//! own thread with their own inference server, so self-play goes on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::arena::{self, ArenaArgs, Openings, Summary};
use crate::train::weights_file;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
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

impl Default for EvaluationConfig {
    fn default() -> EvaluationConfig {
        EvaluationConfig {
            ladder_every: 0,
            baselines: vec!["random".into(), "greedy".into()],
            ladder_games: 20,
            gating: false,
            gate_games: 40,
            gate_threshold: 0.55,
            playouts: 32,
            concurrency: 4,
            max_plies: 400,
        }
    }
}

impl EvaluationConfig {
    pub fn validate(&self) -> Result<(), String> {
        for baseline in &self.baselines {
            engine::players::player_from_spec(baseline, 0)
                .map_err(|e| format!("[evaluation] baselines: {e}"))?;
        }
        if self.ladder_every > 0 && (self.ladder_games == 0 || self.baselines.is_empty()) {
            return Err("[evaluation] a ladder needs ladder_games >= 1 and a baseline".into());
        }
        if self.gating && self.gate_games == 0 {
            return Err("[evaluation] gating needs gate_games >= 1".into());
        }
        if !(0.0..1.0).contains(&self.gate_threshold) {
            return Err("[evaluation] gate_threshold must be in [0, 1)".into());
        }
        if self.playouts == 0 || self.concurrency == 0 || self.max_plies == 0 {
            return Err(
                "[evaluation] playouts, concurrency and max_plies must be at least 1".into(),
            );
        }
        Ok(())
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
    pub fn start(config: EvaluationConfig, checkpoints: PathBuf, seed: u64) -> Evaluations {
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
                        let players =
                            [network(&checkpoints, checkpoint, &config), baseline.clone()];
                        let played = play(&config, players, config.ladder_games, seed, &cancelled);
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
                            network(&checkpoints, candidate, &config),
                            network(&checkpoints, best, &config),
                        ];
                        let played = play(&config, players, config.gate_games, seed, &cancelled);
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

fn network(checkpoints: &Path, checkpoint: u32, config: &EvaluationConfig) -> String {
    let name = format!("{checkpoint:06}");
    format!(
        "{}:playouts={}",
        weights_file(checkpoints, &name).display(),
        config.playouts
    )
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
    players: [String; 2],
    games: usize,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<Summary> {
    let args = ArenaArgs {
        players: players.to_vec(),
        games,
        concurrency: Some(config.concurrency),
        // One libtorch thread: a second OpenMP team would stall self-play's.
        threads: Some(1),
        seed,
        max_plies: config.max_plies,
        openings: Openings::Book,
        opening_plies: 0,
        sprt: None,
        pgn_out: None,
        json: true,
    };
    arena::play_match(&args, cancel, |_| {})
}
