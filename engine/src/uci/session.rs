//! The protocol loop: reads commands, runs searches on their own thread,
//! and answers every accepted `go` with one `bestmove`.

use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::command::{parse_command, time_budget, Command, GoParams, UciError};
use super::options::{OptionError, UciOption};
use super::UciSearcher;
use crate::error::MoveError;
use crate::game::Game;
use crate::position::{Move, Position};
use crate::search::{MoveStats, SearchControl, SearchLimits, TimeBudget};

/// Runs the UCI protocol until `quit` or the end of `input`. Searches run on
/// their own thread, so `isready`, `stop` and `quit` are answered during a
/// search. Every accepted `go` gets exactly one `bestmove`; a refused
/// command gets an `info string error: ...` line and the engine carries on.
/// Returns when `output` fails or `input` cannot be read.
pub fn run_uci<S, R, W>(searcher: S, mut input: R, output: W) -> io::Result<()>
where
    S: UciSearcher + 'static,
    R: BufRead,
    W: Write + Send + 'static,
{
    let mut session = Session {
        searcher: Some(searcher),
        search: None,
        game: Game::new(Position::start()),
        out: Output(Arc::new(Mutex::new(Box::new(output)))),
        debug: false,
    };
    let mut line = Vec::new();
    let result = loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
        // Bytes that are not UTF-8 become U+FFFD and then an unknown command.
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let (handled, quit) = match parse_command(&text) {
            Ok(command) => {
                let quit = matches!(command, Command::Quit);
                (session.handle(command), quit)
            }
            Err(e) => (session.error(&e), false),
        };
        if handled.is_err() || quit {
            break handled;
        }
    };
    let stopped = session.stop_search();
    result.and(stopped)
}

/// Lines to the GUI, from the protocol thread and the search thread.
#[derive(Clone)]
struct Output(Arc<Mutex<Box<dyn Write + Send>>>);

impl Output {
    fn line(&self, text: &str) -> io::Result<()> {
        let mut out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        writeln!(out, "{text}")?;
        out.flush()
    }
}

struct RunningSearch<S> {
    /// Gives the searcher back.
    handle: JoinHandle<S>,
    control: Arc<SearchControl>,
    /// Set just before `bestmove` is written: from then on a new `go` may come.
    answered: Arc<AtomicBool>,
    /// What `ponderhit` gives a pondering search.
    ponder_budget: Option<TimeBudget>,
}

/// The protocol state. The searcher lives either in `searcher` or, during a
/// search, on the search thread.
struct Session<S> {
    searcher: Option<S>,
    search: Option<RunningSearch<S>>,
    game: Game,
    out: Output,
    debug: bool,
}

impl<S: UciSearcher + 'static> Session<S> {
    fn handle(&mut self, command: Command) -> io::Result<()> {
        match command {
            Command::Uci => {
                let Some(searcher) = self.idle_searcher()? else {
                    return self.error(&UciError::Busy);
                };
                let mut lines = vec![
                    format!("id name {}", searcher.id_name()),
                    format!("id author {}", searcher.id_author()),
                ];
                lines.extend(searcher.options().iter().map(UciOption::to_string));
                lines.push("uciok".to_string());
                lines.iter().try_for_each(|line| self.out.line(line))
            }
            Command::Debug(on) => {
                self.debug = on;
                Ok(())
            }
            Command::IsReady => self.out.line("readyok"),
            Command::SetOption { name, value } => self.set_option(&name, value.as_deref()),
            Command::UciNewGame => match self.idle_searcher()? {
                Some(searcher) => {
                    searcher.new_game();
                    self.game = Game::new(Position::start());
                    Ok(())
                }
                None => self.error(&UciError::Busy),
            },
            // A running search has its own copy of the game.
            Command::Position(game) => {
                self.game = *game;
                Ok(())
            }
            Command::Go(go) => self.go(go),
            Command::Stop => self.stop_search(),
            Command::PonderHit => {
                let pondering = self
                    .search
                    .as_mut()
                    .filter(|s| !s.answered.load(Ordering::SeqCst))
                    .and_then(|s| Some((Arc::clone(&s.control), s.ponder_budget.take()?)));
                match pondering {
                    Some((control, budget)) => {
                        control.ponderhit(budget);
                        Ok(())
                    }
                    None => self.error(&UciError::NotPondering),
                }
            }
            Command::Quit => self.stop_search(),
        }
    }

    fn error(&self, error: &UciError) -> io::Result<()> {
        self.out.line(&format!("info string error: {error}"))
    }

    /// The searcher when no search runs, taking it back from a search
    /// that has answered; `None` while a search runs.
    fn idle_searcher(&mut self) -> io::Result<Option<&mut S>> {
        if self
            .search
            .as_ref()
            .is_some_and(|s| s.answered.load(Ordering::SeqCst))
        {
            self.join_search()?;
        }
        Ok(self.searcher.as_mut())
    }

    /// Stops a running search and waits for its `bestmove`.
    fn stop_search(&mut self) -> io::Result<()> {
        if let Some(search) = &self.search {
            search.control.stop();
            self.join_search()?;
        }
        Ok(())
    }

    fn join_search(&mut self) -> io::Result<()> {
        if let Some(search) = self.search.take() {
            let searcher = search
                .handle
                .join()
                .map_err(|_| io::Error::other("the search thread panicked"))?;
            self.searcher = Some(searcher);
        }
        Ok(())
    }

    fn set_option(&mut self, name: &str, value: Option<&str>) -> io::Result<()> {
        let Some(searcher) = self.idle_searcher()? else {
            return self.error(&UciError::Busy);
        };
        let result = searcher
            .options()
            .into_iter()
            .find(|o| o.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| OptionError::Unknown(name.to_string()))
            .and_then(|option| {
                let value = option.parse_value(value)?;
                searcher
                    .set_option(&option.name, &value)
                    .map_err(|message| OptionError::Rejected {
                        name: option.name.clone(),
                        message,
                    })
            });
        match result {
            Ok(()) => Ok(()),
            Err(e) => self.error(&e.into()),
        }
    }

    fn go(&mut self, go: GoParams) -> io::Result<()> {
        if self.idle_searcher()?.is_none() {
            return self.error(&UciError::Busy);
        }
        let pos = *self.game.position();
        if let Some(&mv) = go.searchmoves.iter().find(|&&mv| !pos.is_legal(mv)) {
            let illegal = MoveError::Illegal {
                mv: mv.to_string(),
                fen: pos.fen(),
            };
            return self.error(&UciError::SearchMove(illegal));
        }
        if let Some(outcome) = pos.outcome_without_moves() {
            self.out.line(&format!(
                "info string no legal move: the game is over ({} by {})",
                outcome.result(),
                outcome.reason
            ))?;
            return self.out.line("bestmove 0000");
        }
        let budget = time_budget(&go, pos.side_to_move());
        if self.debug {
            let ms =
                |d: Option<Duration>| d.map_or("none".to_string(), |d| d.as_millis().to_string());
            self.out.line(&format!(
                "info string time budget: soft {} ms, hard {} ms",
                ms(budget.soft),
                ms(budget.hard)
            ))?;
        }
        let control = Arc::new(if go.infinite || go.ponder {
            SearchControl::infinite()
        } else {
            SearchControl::timed(budget)
        });
        let mate_depth = go.mate.map(|m| m.saturating_mul(2) - 1);
        let limits = SearchLimits {
            depth: match (go.depth, mate_depth) {
                (Some(d), Some(m)) => Some(d.min(m)),
                (d, m) => d.or(m),
            },
            nodes: go.nodes,
            searchmoves: go.searchmoves,
            control: Arc::clone(&control),
        };
        let Some(searcher) = self.searcher.take() else {
            return self.error(&UciError::Busy);
        };
        let answered = Arc::new(AtomicBool::new(false));
        let job = SearchJob {
            game: self.game.clone(),
            limits,
            out: self.out.clone(),
            answered: Arc::clone(&answered),
        };
        self.search = Some(RunningSearch {
            handle: thread::spawn(move || job.run(searcher)),
            control,
            answered,
            ponder_budget: go.ponder.then_some(budget),
        });
        Ok(())
    }
}

/// One search on its own thread.
struct SearchJob {
    game: Game,
    limits: SearchLimits,
    out: Output,
    answered: Arc<AtomicBool>,
}

impl SearchJob {
    /// Searches, then writes exactly one `bestmove`; gives the searcher back.
    fn run<S: UciSearcher>(self, mut searcher: S) -> S {
        let pos = *self.game.position();
        let allowed: Vec<Move> = pos
            .legal_moves()
            .into_iter()
            .filter(|mv| self.limits.searchmoves.is_empty() || self.limits.searchmoves.contains(mv))
            .collect();
        let mut pv = Vec::new();
        let searched = panic::catch_unwind(AssertUnwindSafe(|| {
            searcher.search(&self.game, &self.limits, &mut |info| {
                pv.clone_from(&info.pv);
                let lines = std::iter::once(info.to_string())
                    .chain(info.moves.iter().map(MoveStats::to_string));
                // Nobody reads the answer any more: stop early.
                if lines.map(|line| self.out.line(&line)).any(|r| r.is_err()) {
                    self.limits.control.stop();
                }
            })
        }));
        // A faulty searcher must not leave the GUI without a legal answer.
        let best = match searched {
            Ok(mv) if allowed.contains(&mv) => mv,
            Ok(mv) => {
                self.report_error(&format!("the searcher chose `{mv}`, which is not allowed"));
                allowed[0]
            }
            Err(_) => {
                self.report_error("the search failed");
                allowed[0]
            }
        };
        self.limits.control.wait_while_infinite();
        let ponder = match pv[..] {
            [first, reply, ..] if first == best && pos.after(best).is_legal(reply) => {
                format!(" ponder {reply}")
            }
            _ => String::new(),
        };
        self.answered.store(true, Ordering::SeqCst);
        // A failed write shows up on the protocol thread's next write too.
        let _ = self.out.line(&format!("bestmove {best}{ponder}"));
        searcher
    }

    fn report_error(&self, message: &str) {
        let _ = self.out.line(&format!("info string error: {message}"));
    }
}
