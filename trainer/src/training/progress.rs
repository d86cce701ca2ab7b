//! Console progress for long runs. Draws on stderr only when it is a
//! terminal (and `TERM` is not `dumb`); otherwise every bar is hidden and
//! draws nothing, so logs and CI output stay clean and callers should log a
//! periodic status line instead (see [`Progress::is_hidden`]).
//!
//! While bars are drawn, other stderr output (tracing) should go through
//! [`Progress::suspend`], or it tears the display.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{FormattedDuration, MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the training status line shows; the caller fills it from its counters.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub games: u64,
    pub samples: u64,
    pub train_steps: u64,
    pub policy_loss: Option<f64>,
    pub value_loss: Option<f64>,
    pub positions_per_s: f64,
    pub nodes_per_s: f64,
    pub checkpoint: u32,
}

/// Two lines for a training run: time (a bar against the time limit, or a
/// spinner without one) with the game count, and a status line.
pub struct Progress {
    multi: MultiProgress,
    clock: ProgressBar,
    status: ProgressBar,
    start: Instant,
    limit: Option<Duration>,
}

const TICK: Duration = Duration::from_millis(250);

impl Progress {
    /// `total_minutes`: the run's time limit, if any (non-positive or
    /// non-finite counts as none). `enabled: false` hides everything.
    pub fn new(total_minutes: Option<f64>, enabled: bool) -> Progress {
        let limit = total_minutes
            .and_then(|m| Duration::try_from_secs_f64(m * 60.0).ok())
            .filter(|d| !d.is_zero());
        let multi = MultiProgress::with_draw_target(draw_target(enabled));
        let clock = match limit {
            Some(limit) => {
                let bar = ProgressBar::new(limit.as_secs().max(1));
                bar.set_style(style(
                    "{spinner:.green} {elapsed_precise} [{bar:40.cyan/blue}] {percent:>3}% {msg}",
                ));
                bar
            }
            None => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(style("{spinner:.green} {elapsed_precise} {msg}"));
                bar
            }
        };
        let clock = multi.add(clock);
        let status = multi.add(ProgressBar::new_spinner());
        status.set_style(style("  {msg}"));
        if !multi.is_hidden() {
            clock.enable_steady_tick(TICK);
        }
        let progress = Progress {
            multi,
            clock,
            status,
            start: Instant::now(),
            limit,
        };
        progress.update(&Status::default());
        progress
    }

    /// True when nothing is drawn (disabled, or stderr is not a terminal).
    pub fn is_hidden(&self) -> bool {
        self.multi.is_hidden()
    }

    pub fn update(&self, status: &Status) {
        let mut games = format!("games {}", status.games);
        if let Some(limit) = self.limit {
            let elapsed = self.start.elapsed();
            self.clock
                .set_position(elapsed.as_secs().min(limit.as_secs()));
            let left = limit.saturating_sub(elapsed);
            games.push_str(&format!(
                " · {} left of {}",
                FormattedDuration(left),
                FormattedDuration(limit)
            ));
        }
        self.clock.set_message(games);
        self.status.set_message(status_line(status));
    }

    /// Runs `f` (e.g. printing) with the bars cleared, then redraws them.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.multi.suspend(f)
    }

    /// Stops the display, leaving its last state and `message` on screen.
    pub fn finish(&self, message: impl Into<String>) {
        self.clock.finish();
        self.status.finish_with_message(message.into());
    }
}

/// A bar for a finite job (arena games, benchmarks), styled like the rest,
/// with `what` in front; hidden when stderr is not a terminal.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), draw_target(true));
    bar.set_style(style(
        "{prefix} {elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} eta {eta} {msg}",
    ));
    bar.set_prefix(what.to_string());
    bar
}

fn draw_target(enabled: bool) -> ProgressDrawTarget {
    // indicatif also hides a non-terminal stderr; checking here makes the
    // rule explicit rather than an indicatif default.
    if enabled && std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("progress templates are fixed and valid")
        .progress_chars("=> ")
}

fn status_line(s: &Status) -> String {
    let mut line = format!(
        "samples {} · steps {} · {} pos/s · {} nodes/s",
        si(s.samples as f64),
        s.train_steps,
        si(s.positions_per_s),
        si(s.nodes_per_s)
    );
    if let Some(p) = s.policy_loss {
        line.push_str(&format!(" · policy loss {p:.3}"));
    }
    if let Some(v) = s.value_loss {
        line.push_str(&format!(" · value loss {v:.3}"));
    }
    line.push_str(&format!(" · checkpoint {}", s.checkpoint));
    line
}

/// Compact decimal magnitude: 950, 12.3k, 4.56M.
fn si(x: f64) -> String {
    let (scaled, unit) = match x.abs() {
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e3 => (x / 1e3, "k"),
        _ => return format!("{x:.0}"),
    };
    let digits = if scaled.abs() >= 100.0 {
        0
    } else if scaled.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{scaled:.digits$}{unit}")
}

/// A flag that the first Ctrl-C sets, after saying on stderr what stopping
/// does (`doing`); a second Ctrl-C kills the process the usual way.
pub fn stop_on_ctrl_c(doing: &'static str) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    // Only one handler per process: a second call keeps the first.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: {doing} (Ctrl-C again to kill)");
    });
    stop
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_is_compact() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(950.4), "950");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(45_600.0), "45.6k");
        assert_eq!(si(820_000.0), "820k");
        assert_eq!(si(4_560_000.0), "4.56M");
        assert_eq!(si(2.5e9), "2.50G");
    }

    #[test]
    fn status_line_shows_losses_only_when_known() {
        let mut status = Status {
            games: 12,
            samples: 1_234_567,
            train_steps: 340,
            positions_per_s: 1520.0,
            nodes_per_s: 820_000.0,
            checkpoint: 7,
            ..Status::default()
        };
        assert_eq!(
            status_line(&status),
            "samples 1.23M · steps 340 · 1.52k pos/s · 820k nodes/s · checkpoint 7"
        );
        status.policy_loss = Some(2.3101);
        status.value_loss = Some(0.84);
        assert!(
            status_line(&status).ends_with("· policy loss 2.310 · value loss 0.840 · checkpoint 7")
        );
    }

    #[test]
    fn disabled_progress_is_hidden_and_usable() {
        let progress = Progress::new(Some(1.0), false);
        assert!(progress.is_hidden());
        progress.update(&Status {
            games: 3,
            ..Status::default()
        });
        assert_eq!(progress.suspend(|| 5), 5);
        progress.finish("done");
        assert!(progress.clock.is_finished());
    }

    #[test]
    fn time_limit_sets_the_bar_length() {
        assert_eq!(Progress::new(Some(2.0), false).clock.length(), Some(120));
        for none in [None, Some(0.0), Some(-1.0), Some(f64::NAN)] {
            assert_eq!(Progress::new(none, false).clock.length(), None, "{none:?}");
        }
    }

    #[test]
    fn bar_has_the_given_length() {
        let bar = bar(10, "arena");
        bar.inc(3);
        assert_eq!((bar.position(), bar.length()), (3, Some(10)));
        assert_eq!(bar.prefix(), "arena");
    }
}
