//! A network searched with MCTS as a UCI engine for Chess-mix (`mixzero
//! uci`), on the protocol loop of [`engine::uci`].

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use engine::mcts::{RootSearch, Search, SearchConfig, DRAW_SCORES, POLICY_TEMPERATURES};
use engine::players::mcts::MctsPlayer;
use engine::uci::{
    MoveStats, OptionKind, OptionValue, Score, SearchInfo, SearchLimits, UciOption, UciSearcher,
};
use engine::{Game, Move};
use models::server::{InferenceServer, ServerConfig};

/// Playouts of a `go` that names no limit at all, so that it still ends.
pub const BARE_GO_PLAYOUTS: u64 = 800;
/// How often a running search reports.
const INFO_EVERY: std::time::Duration = std::time::Duration::from_millis(500);
const MAX_WAIT_US: u64 = 200;

/// What a network engine plays with; the UCI options change them.
#[derive(Debug, Clone)]
pub struct NetSettings {
    /// Weights: an exported file, a checkpoint, a run directory or checkpoints/latest.
    pub weights: PathBuf,
    /// libtorch threads of the inference thread (0 = one per core).
    pub threads: usize,
    /// Leaves the search evaluates together (the batch size).
    pub batch: usize,
    /// Most playouts per move (0 = only the time and `go` limits).
    pub playouts: u64,
    pub c_puct: f32,
    /// `[search] capture_prior` (0 = the network's priors alone).
    pub capture_prior: f32,
    /// `[search] policy_temperature` (1 = the network's priors as they are).
    pub policy_temperature: f32,
    /// PUCT or Gumbel at the root.
    pub root: RootSearch,
    /// `[search] moves_left_effect` (0 = off).
    pub moves_left_effect: f32,
    /// `[search] draw_score`: a draw's worth to the engine (0 = a draw).
    pub draw_score: f32,
    /// Each root move's statistics after each search (lc0's `VerboseMoveStats`).
    pub verbose_move_stats: bool,
}

/// A loaded network with its inference server and search.
struct Loaded {
    /// Kept alive while `player` asks it for evaluations.
    _server: InferenceServer,
    player: MctsPlayer,
}

pub struct NetSearcher {
    settings: NetSettings,
    loaded: Loaded,
}

impl NetSearcher {
    pub fn new(settings: NetSettings) -> Result<NetSearcher> {
        let loaded = load(&settings)?;
        Ok(NetSearcher { settings, loaded })
    }

    /// Applies changed settings, keeping the old engine if they fail.
    fn reload(&mut self, settings: NetSettings) -> Result<(), String> {
        self.loaded = load(&settings).map_err(|e| format!("{e:#}"))?;
        self.settings = settings;
        Ok(())
    }
}

fn load(settings: &NetSettings) -> Result<Loaded> {
    let path = crate::run_dir::resolve_weights(&settings.weights)?;
    let net = models::weights::load(&path, models::device())?;
    let history = net.arch().encoder.history;
    let batch = settings.batch.max(1);
    let server = InferenceServer::start(
        net,
        ServerConfig {
            max_batch: batch,
            max_wait_us: MAX_WAIT_US,
            threads: settings.threads,
            replicas: 1,
            precision: models::Precision::Auto,
        },
    );
    let config = SearchConfig {
        history,
        leaves_in_flight: batch,
        c_puct: settings.c_puct,
        capture_prior: settings.capture_prior,
        policy_temperature: settings.policy_temperature,
        root: settings.root,
        moves_left_effect: settings.moves_left_effect,
        draw_score: settings.draw_score,
        ..SearchConfig::play()
    };
    let player = MctsPlayer::new(std::sync::Arc::new(server.client()), 1, config);
    Ok(Loaded {
        _server: server,
        player,
    })
}

/// Option `name`'s `text` as a number in `range` (`shown` in the refusal).
fn number_option(
    name: &str,
    text: &str,
    range: impl std::ops::RangeBounds<f32>,
    shown: &str,
) -> Result<f32, String> {
    text.trim()
        .parse::<f32>()
        .ok()
        .filter(|x| range.contains(x))
        .ok_or_else(|| format!("{name} `{text}` is not a number in {shown}"))
}

fn info(search: &Search, started: Instant, playouts: u64) -> SearchInfo {
    let pv = search.pv();
    let wdl = search.root_wdl();
    SearchInfo {
        depth: pv.len() as u32,
        seldepth: None,
        nodes: playouts,
        time: started.elapsed(),
        score: Score::from_value(wdl.value()),
        wdl: Some(wdl.into()),
        pv,
        moves: Vec::new(),
    }
}

/// Whether the principal variation `pv` from `game` is `depth` moves deep or
/// ends the game: the tree never grows past a mate or a draw, so a deeper
/// line would never come.
fn deep_enough(game: &Game, pv: &[Move], depth: u32) -> bool {
    if pv.len() >= depth as usize {
        return true;
    }
    let mut line = game.clone();
    for &mv in pv {
        line.play_unchecked(mv);
    }
    line.outcome().is_some()
}

impl UciSearcher for NetSearcher {
    fn id_name(&self) -> String {
        format!("mixzero {}", env!("CARGO_PKG_VERSION"))
    }

    fn id_author(&self) -> String {
        "the mixzero developers".to_string()
    }

    fn options(&self) -> Vec<UciOption> {
        let s = &self.settings;
        let spin = |name: &str, default: i64, min: i64, max: i64| UciOption {
            name: name.to_string(),
            kind: OptionKind::Spin { default, min, max },
        };
        vec![
            UciOption {
                name: "Weights".to_string(),
                kind: OptionKind::String {
                    default: s.weights.display().to_string(),
                },
            },
            spin("Threads", s.threads as i64, 0, 256),
            spin("BatchSize", s.batch as i64, 1, 1024),
            spin("Playouts", s.playouts as i64, 0, 1_000_000_000),
            UciOption {
                name: "CPuct".to_string(),
                kind: OptionKind::String {
                    default: s.c_puct.to_string(),
                },
            },
            UciOption {
                name: "CapturePrior".to_string(),
                kind: OptionKind::String {
                    default: s.capture_prior.to_string(),
                },
            },
            UciOption {
                name: "PolicyTemperature".to_string(),
                kind: OptionKind::String {
                    default: s.policy_temperature.to_string(),
                },
            },
            UciOption {
                name: "MovesLeftEffect".to_string(),
                kind: OptionKind::String {
                    default: s.moves_left_effect.to_string(),
                },
            },
            UciOption {
                name: "DrawScore".to_string(),
                kind: OptionKind::String {
                    default: s.draw_score.to_string(),
                },
            },
            UciOption {
                name: "RootSearch".to_string(),
                kind: OptionKind::Combo {
                    default: s.root.to_string(),
                    choices: vec![RootSearch::Puct.to_string(), RootSearch::Gumbel.to_string()],
                },
            },
            UciOption {
                name: "VerboseMoveStats".to_string(),
                kind: OptionKind::Check {
                    default: s.verbose_move_stats,
                },
            },
        ]
    }

    fn set_option(&mut self, name: &str, value: &OptionValue) -> Result<(), String> {
        let mut settings = self.settings.clone();
        match (name, value) {
            ("Weights", OptionValue::String(path)) => settings.weights = PathBuf::from(path),
            ("Threads", OptionValue::Spin(n)) => settings.threads = *n as usize,
            ("BatchSize", OptionValue::Spin(n)) => settings.batch = *n as usize,
            ("Playouts", OptionValue::Spin(n)) => {
                // Read at each `go`: nothing to reload.
                self.settings.playouts = *n as u64;
                return Ok(());
            }
            ("CPuct", OptionValue::String(text)) => {
                settings.c_puct = text
                    .trim()
                    .parse::<f32>()
                    .ok()
                    .filter(|c| c.is_finite() && *c > 0.0)
                    .ok_or_else(|| format!("CPuct `{text}` is not a positive number"))?;
            }
            ("CapturePrior", OptionValue::String(text)) => {
                settings.capture_prior = number_option(name, text, 0.0..1.0, "[0, 1)")?;
            }
            ("PolicyTemperature", OptionValue::String(text)) => {
                let shown = format!("{POLICY_TEMPERATURES:?}");
                settings.policy_temperature =
                    number_option(name, text, POLICY_TEMPERATURES, &shown)?;
            }
            ("MovesLeftEffect", OptionValue::String(text)) => {
                settings.moves_left_effect = number_option(name, text, 0.0..=1.0, "[0, 1]")?;
            }
            ("DrawScore", OptionValue::String(text)) => {
                let shown = format!("{DRAW_SCORES:?}");
                settings.draw_score = number_option(name, text, DRAW_SCORES, &shown)?;
            }
            ("RootSearch", OptionValue::Combo(text)) => settings.root = text.parse()?,
            ("VerboseMoveStats", OptionValue::Check(on)) => {
                // Read after each search: nothing to reload.
                self.settings.verbose_move_stats = *on;
                return Ok(());
            }
            _ => return Err(format!("no option {name} of this type")),
        }
        self.reload(settings)
    }

    fn new_game(&mut self) {
        self.loaded.player.forget_tree();
    }

    fn search(
        &mut self,
        game: &Game,
        limits: &SearchLimits,
        report: &mut dyn FnMut(&SearchInfo),
    ) -> Move {
        let started = Instant::now();
        let control = &limits.control;
        let allowed = |mv: Move| limits.searchmoves.is_empty() || limits.searchmoves.contains(&mv);
        let choices = game
            .position()
            .legal_moves()
            .iter()
            .filter(|&&mv| allowed(mv))
            .count();
        let unlimited = limits.nodes.is_none()
            && limits.depth.is_none()
            && !control.has_deadline()
            && !control.is_infinite();
        let cap = match self.settings.playouts {
            0 if unlimited => Some(BARE_GO_PLAYOUTS),
            0 => None,
            n => Some(n),
        };
        let cap = match (cap, limits.nodes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // A clock may stop the search before the cap: a Gumbel root then
        // plays the best of the moves it got furthest with.
        let planned = cap.map(|cap| cap.min(u32::MAX as u64) as u32);
        let mut first_visits = None;
        let mut last_report = started;
        let mv = self
            .loaded
            .player
            .search_among(game, allowed, planned, |search| {
                let visits = search.root_visits() as u64;
                let done = visits - *first_visits.get_or_insert(visits);
                if last_report.elapsed() >= INFO_EVERY {
                    report(&info(search, started, done));
                    last_report = Instant::now();
                }
                if control.should_stop() {
                    return 0;
                }
                if control.is_infinite() {
                    return usize::MAX;
                }
                let finished = choices <= 1
                    || control.soft_deadline_passed()
                    || cap.is_some_and(|cap| done >= cap)
                    || limits
                        .depth
                        .is_some_and(|depth| deep_enough(game, &search.pv(), depth));
                if finished {
                    return 0;
                }
                cap.map_or(usize::MAX, |cap| (cap - done) as usize)
            });
        if let Some(search) = self.loaded.player.last_search() {
            let done = search.root_visits() as u64 - first_visits.unwrap_or(0);
            let mut last = info(search, started, done);
            if self.settings.verbose_move_stats {
                // Best first, as `bestmove` ranks them.
                let ranked = search.ranked_root_children().into_iter();
                last.moves = ranked.map(MoveStats::from).collect();
            }
            report(&last);
        }
        mv
    }
}
