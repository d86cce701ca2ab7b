//! Play sessions: one game per browser tab, refereed by the engine crate.
//!
//! The server is authoritative: the page sends commands, a session checks
//! them against its [`Game`] and answers with the new state. When an engine
//! is to move, a search thread borrows that side's engine, publishes what
//! it thinks while it searches, and hands back a move that is played only
//! if the game has not changed meanwhile (a take-back or a new game cancels
//! it). Searches hold one of a bounded number of slots; the page is told
//! when its engine waits for one. A session whose last event stream closed
//! (the tab went away) has its search stopped and is dropped a minute later.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use engine::mcts::{Search, SearchConfig};
use engine::players::mcts::MctsPlayer;
use engine::players::{player_from_spec, AlphaBeta, Player};
use engine::uci::{Score, SearchControl, SearchInfo, SearchLimits};
use engine::{Color, Game, Move, Outcome, Position, Reason};
use models::server::InferenceClient;
use rand::Rng;

use super::protocol::{
    legal_texts, move_texts, start_position, Command, NetBudget, OutcomeView, ProtocolError,
    Rules56, SeatSpec, StateMsg, ThinkingMsg, TopMove,
};
use crate::eval::external_engine::{UciConfig, UciEngine};

/// How often a running search tells the page what it thinks.
const THINKING_EVERY: Duration = Duration::from_millis(200);
/// A session without an open event stream for this long is dropped.
const DETACHED_TTL: Duration = Duration::from_secs(60);
/// Root moves listed in "what the engine thinks".
const TOP_MOVES: usize = 8;

/// The served network: a client of an inference server that `run` owns.
pub struct NetSource {
    pub name: String,
    pub client: InferenceClient,
    pub history: usize,
}

/// A counting semaphore for searches.
struct Slots {
    used: Mutex<usize>,
    freed: Condvar,
    max: usize,
}

struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *lock(&self.0.used) -= 1;
        self.0.freed.notify_one();
    }
}

impl Slots {
    fn try_acquire(&self) -> Option<SlotGuard<'_>> {
        let mut used = lock(&self.used);
        if *used < self.max {
            *used += 1;
            return Some(SlotGuard(self));
        }
        None
    }

    /// Waits for a slot; `None` once `control` is stopped.
    fn acquire(&self, control: &SearchControl) -> Option<SlotGuard<'_>> {
        let mut used = lock(&self.used);
        loop {
            if control.should_stop() {
                return None;
            }
            if *used < self.max {
                *used += 1;
                return Some(SlotGuard(self));
            }
            used = self
                .freed
                .wait_timeout(used, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// What every session shares: the engines on offer, the search slots and
/// the session table.
pub struct Hub {
    pub net: Option<NetSource>,
    /// `uci:` specs given with `--engine`.
    pub engines: Vec<String>,
    pub max_sessions: usize,
    slots: Slots,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl Hub {
    pub fn new(
        net: Option<NetSource>,
        engines: Vec<String>,
        max_searches: usize,
        max_sessions: usize,
    ) -> Hub {
        Hub {
            net,
            engines,
            max_sessions,
            slots: Slots {
                used: Mutex::new(0),
                freed: Condvar::new(),
                max: max_searches.max(1),
            },
            sessions: Mutex::new(HashMap::new()),
        }
    }

    pub fn max_searches(&self) -> usize {
        self.slots.max
    }

    /// A new session with the standard start and a human on both sides.
    pub fn create_session(&self) -> Result<Arc<Session>, ProtocolError> {
        self.reap();
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= self.max_sessions {
            return Err(ProtocolError::TooManySessions(self.max_sessions));
        }
        let id = format!("{:032x}", rand::rng().random::<u128>());
        let session = Arc::new(Session {
            id: id.clone(),
            inner: Mutex::new(Inner {
                game: Game::new(Position::start()),
                seats: [SeatSpec::Human, SeatSpec::Human],
                engines: [None, None],
                seat_epoch: 0,
                generation: 0,
                version: 1,
                thinking: None,
                thinking_seq: 0,
                search: None,
                waiting: false,
                note: None,
                streams: 0,
                detached_since: Some(Instant::now()),
            }),
            changed: Condvar::new(),
        });
        sessions.insert(id, Arc::clone(&session));
        Ok(session)
    }

    pub fn session(&self, id: &str) -> Result<Arc<Session>, ProtocolError> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or(ProtocolError::UnknownSession)
    }

    /// Drops sessions that have had no event stream for a while.
    pub fn reap(&self) {
        lock(&self.sessions).retain(|_, s| {
            lock(&s.inner)
                .detached_since
                .is_none_or(|t| t.elapsed() <= DETACHED_TTL)
        });
    }
}

/// A side's engine, kept between moves (trees, tables, processes).
enum Engine {
    Builtin(Box<dyn Player + Send>),
    AlphaBeta(Box<AlphaBeta>),
    Network(Box<MctsPlayer>, NetBudget),
    /// Started at its first move; dropped (ending the process) when it fails.
    Uci(Box<(Option<UciEngine>, UciConfig)>),
}

impl Engine {
    fn new(spec: &SeatSpec, hub: &Hub) -> Result<Option<(Engine, String)>, ProtocolError> {
        let seed = rand::rng().random();
        Ok(Some(match spec {
            SeatSpec::Human => return Ok(None),
            SeatSpec::Builtin(text) => {
                let engine = match text.strip_prefix("alphabeta:").map(str::parse::<u32>) {
                    Some(Ok(depth)) => Engine::AlphaBeta(Box::new(AlphaBeta::new(depth, seed))),
                    _ => Engine::Builtin(player_from_spec(text, seed).map_err(|e| {
                        ProtocolError::BadSeat {
                            spec: text.clone(),
                            why: e.to_string(),
                        }
                    })?),
                };
                (engine, text.clone())
            }
            SeatSpec::Network(budget) => {
                let net = hub.net.as_ref().ok_or(ProtocolError::NoNetwork)?;
                let config = SearchConfig {
                    history: net.history,
                    ..SearchConfig::play()
                };
                let player = MctsPlayer::new(Arc::new(net.client.clone()), 1, config);
                let name = match budget {
                    NetBudget::Playouts(n) => format!("{} ({n} playouts)", net.name),
                    NetBudget::MovetimeMs(ms) => format!("{} ({ms} ms)", net.name),
                };
                (Engine::Network(Box::new(player), *budget), name)
            }
            SeatSpec::Uci(text) => {
                let config = UciConfig::parse(text).map_err(|e| ProtocolError::BadSeat {
                    spec: text.clone(),
                    why: e.to_string(),
                })?;
                let name = config.name.clone();
                (Engine::Uci(Box::new((None, config))), name)
            }
        }))
    }

    /// Chooses a move in `game` (not over), publishing what it thinks.
    /// `Err` when the engine failed (a UCI engine's crash or timeout).
    fn think(
        &mut self,
        game: &Game,
        name: &str,
        control: &Arc<SearchControl>,
        publish: &mut dyn FnMut(ThinkingMsg),
    ) -> Result<Move, String> {
        match self {
            Engine::Builtin(player) => Ok(player.choose(game)),
            Engine::AlphaBeta(ab) => {
                let limits = SearchLimits {
                    control: Arc::clone(control),
                    ..SearchLimits::default()
                };
                let pos = *game.position();
                let result = ab.search_limited(game, &limits, |info| {
                    publish(alphabeta_thinking(info, &pos, name));
                });
                Ok(result.best)
            }
            Engine::Network(player, budget) => {
                let started = Instant::now();
                let mut last = started;
                let mut first_visits = None;
                let mut first_batch = true;
                let pos = *game.position();
                let planned = match *budget {
                    NetBudget::Playouts(n) => Some(n),
                    NetBudget::MovetimeMs(_) => None,
                };
                let mv = player.search_until(game, planned, |search| {
                    let visits = search.root_visits();
                    let done = visits - *first_visits.get_or_insert(visits);
                    if last.elapsed() >= THINKING_EVERY {
                        publish(mcts_thinking(search, &pos, name, false));
                        last = Instant::now();
                    }
                    if control.should_stop() {
                        return 0;
                    }
                    match *budget {
                        NetBudget::Playouts(n) => n.saturating_sub(done) as usize,
                        NetBudget::MovetimeMs(ms) => {
                            // At least one batch of leaves, however short the time.
                            let more =
                                first_batch || started.elapsed() < Duration::from_millis(ms.into());
                            first_batch = false;
                            if more {
                                search.config().leaves_in_flight
                            } else {
                                0
                            }
                        }
                    }
                });
                if let Some(search) = player.last_search() {
                    publish(mcts_thinking(search, &pos, name, true));
                }
                Ok(mv)
            }
            Engine::Uci(uci) => {
                let (slot, config) = &mut **uci;
                let mut engine = match slot.take() {
                    Some(engine) => engine,
                    None => {
                        let mut fresh = UciEngine::start(config).map_err(|e| e.to_string())?;
                        fresh.new_game().map_err(|e| e.to_string())?;
                        fresh
                    }
                };
                let mv = engine.best_move(game).map_err(|e| e.to_string())?;
                *slot = Some(engine);
                Ok(mv)
            }
        }
    }
}

/// The SAN of `line` from `pos`, stopping at a move that is not legal.
fn san_line(pos: &Position, line: &[Move]) -> (Vec<String>, Vec<String>) {
    let mut pos = *pos;
    let mut san = Vec::new();
    let mut uci = Vec::new();
    for &mv in line {
        if !pos.is_legal(mv) {
            break;
        }
        san.push(pos.san(mv));
        uci.push(mv.to_string());
        pos = pos.after(mv);
    }
    (san, uci)
}

/// `[win, draw, loss]` for the side to move as seen from White.
fn for_white(pos: &Position, wdl: [f32; 3]) -> [f32; 3] {
    match pos.side_to_move() {
        Color::White => wdl,
        Color::Black => [wdl[2], wdl[1], wdl[0]],
    }
}

fn mcts_thinking(search: &Search, pos: &Position, name: &str, done: bool) -> ThinkingMsg {
    // Ranked as the move is chosen, so the move played heads the list.
    let top = search
        .ranked_root_children()
        .iter()
        .take(TOP_MOVES)
        .map(|c| TopMove {
            uci: c.mv.to_string(),
            san: pos.san(c.mv),
            visits: c.visits,
            q: Some(c.q).filter(|q| q.is_finite()),
            prior: c.prior,
        })
        .collect();
    let wdl = search.root_wdl();
    let (pv_san, pv) = san_line(pos, &search.pv());
    ThinkingMsg {
        fen: pos.fen(),
        engine: name.to_string(),
        nodes: search.root_visits().into(),
        depth: None,
        score_cp: None,
        white_wdl: for_white(pos, [wdl.win, wdl.draw, wdl.loss]),
        top,
        pv_san,
        pv,
        done,
    }
}

fn alphabeta_thinking(info: &SearchInfo, pos: &Position, name: &str) -> ThinkingMsg {
    let (score_cp, wdl) = match (info.wdl, info.score) {
        (Some(w), Score::Centipawns(cp)) => {
            (Some(cp), [w.win, w.draw, w.loss].map(|p| p as f32 / 1000.0))
        }
        (None, Score::Centipawns(cp)) => {
            // No draw estimate: the expected score on the usual logistic scale.
            let win = 1.0 / (1.0 + 10f32.powf(-(cp as f32) / 400.0));
            (Some(cp), [win, 0.0, 1.0 - win])
        }
        (_, Score::Mate(n)) if n > 0 => (None, [1.0, 0.0, 0.0]),
        (_, Score::Mate(_)) => (None, [0.0, 0.0, 1.0]),
    };
    let (pv_san, pv) = san_line(pos, &info.pv);
    ThinkingMsg {
        fen: pos.fen(),
        engine: name.to_string(),
        nodes: info.nodes,
        depth: Some(info.depth),
        score_cp,
        white_wdl: for_white(pos, wdl),
        top: Vec::new(),
        pv_san,
        pv,
        done: false,
    }
}

pub struct Session {
    pub id: String,
    inner: Mutex<Inner>,
    /// Signalled on every change of the state or of what the engine thinks.
    changed: Condvar,
}

struct Inner {
    game: Game,
    seats: [SeatSpec; 2],
    /// Each engine side's engine and display name; `None` for a human, and
    /// while a search thread has borrowed it.
    engines: [Option<(Engine, String)>; 2],
    /// Grows with each new game, so that an engine coming back from a
    /// cancelled search of an older game is dropped, not reseated.
    seat_epoch: u64,
    /// Grows with each change of the game: a search result for an older
    /// generation is thrown away.
    generation: u64,
    /// Grows with every change the page should see.
    version: u64,
    thinking: Option<ThinkingMsg>,
    thinking_seq: u64,
    /// The running search's control, to stop it.
    search: Option<Arc<SearchControl>>,
    waiting: bool,
    note: Option<String>,
    streams: usize,
    detached_since: Option<Instant>,
}

impl Inner {
    fn state(&self) -> StateMsg {
        let pos = self.game.position();
        StateMsg {
            version: self.version,
            start_fen: self.game.start().fen(),
            fen: pos.fen(),
            side: pos.side_to_move().name(),
            in_check: pos.in_check(),
            legal: legal_texts(&self.game),
            moves: move_texts(&self.game),
            outcome: OutcomeView::of(&self.game),
            rules: Rules56::of(pos),
            players: self.seats.clone().map(|s| seat_name(&s)),
            thinking: self.search.is_some(),
            waiting: self.waiting,
            note: self.note.clone(),
        }
    }

    fn is_human(&self, color: Color) -> bool {
        self.seats[color.index()] == SeatSpec::Human
    }

    /// Stops the running search, if any; its thread hands the engine back.
    fn cancel_search(&mut self) {
        if let Some(control) = self.search.take() {
            control.stop();
        }
        self.waiting = false;
        self.thinking = None;
    }

    /// A change of the game: older searches' results no longer apply.
    fn changed_game(&mut self) {
        self.cancel_search();
        self.generation += 1;
        self.version += 1;
        self.note = None;
    }
}

fn seat_name(seat: &SeatSpec) -> String {
    match seat {
        SeatSpec::Human => "human".into(),
        SeatSpec::Builtin(s) | SeatSpec::Uci(s) => s.clone(),
        SeatSpec::Network(NetBudget::Playouts(n)) => format!("net:playouts={n}"),
        SeatSpec::Network(NetBudget::MovetimeMs(ms)) => format!("net:movetime={ms}"),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a search came from, so that its result lands only where it belongs.
struct Searched {
    side: Color,
    /// The seats it was made for ([`Inner::seat_epoch`]).
    epoch: u64,
    /// The game it searched ([`Inner::generation`]).
    generation: u64,
    control: Arc<SearchControl>,
}

/// What an event stream should send next.
pub enum Event {
    State(Box<StateMsg>),
    Thinking(ThinkingMsg),
}

/// Where an event stream is: the last version and thinking it sent.
#[derive(Default)]
pub struct Cursor {
    version: u64,
    thinking_seq: u64,
}

impl Session {
    /// The current state.
    pub fn state(&self) -> StateMsg {
        lock(&self.inner).state()
    }

    /// Applies a command from the page and returns the new state.
    pub fn command(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        command: Command,
    ) -> Result<StateMsg, ProtocolError> {
        match command {
            Command::NewGame { white, black, fen } => {
                let seats = [
                    SeatSpec::parse(&white, &hub.engines)?,
                    SeatSpec::parse(&black, &hub.engines)?,
                ];
                let start = start_position(fen.as_deref())?;
                let engines = [Engine::new(&seats[0], hub)?, Engine::new(&seats[1], hub)?];
                let mut inner = lock(&self.inner);
                inner.changed_game();
                inner.game = Game::new(start);
                inner.seats = seats;
                inner.engines = engines;
                inner.seat_epoch += 1;
                self.schedule(hub, &mut inner);
                self.changed.notify_all();
                Ok(inner.state())
            }
            Command::Move { mv: text } => {
                let mut inner = lock(&self.inner);
                if inner.game.outcome().is_some() {
                    return Err(ProtocolError::GameOver);
                }
                if !inner.is_human(inner.game.position().side_to_move()) {
                    return Err(ProtocolError::NotYourTurn);
                }
                let bad = |source| ProtocolError::BadMove {
                    text: text.chars().take(20).collect(),
                    source,
                };
                let mv = inner.game.position().parse_move(&text).map_err(bad)?;
                inner.game.play(mv).map_err(bad)?;
                inner.changed_game();
                self.schedule(hub, &mut inner);
                self.changed.notify_all();
                Ok(inner.state())
            }
            Command::Takeback => {
                let mut inner = lock(&self.inner);
                let moves = inner.game.moves().to_vec();
                if moves.is_empty() {
                    return Err(ProtocolError::NothingToTakeBack);
                }
                let any_human = Color::ALL.iter().any(|&c| inner.is_human(c));
                // Back to the last position where a human was to move, at
                // least one ply back.
                let start = *inner.game.start();
                let mut keep = moves.len() - 1;
                let side_at = |n: usize| {
                    let white_starts = start.side_to_move() == Color::White;
                    match (n % 2 == 0) == white_starts {
                        true => Color::White,
                        false => Color::Black,
                    }
                };
                while any_human && keep > 0 && !inner.is_human(side_at(keep)) {
                    keep -= 1;
                }
                let mut game = Game::new(start);
                for &mv in &moves[..keep] {
                    game.play_unchecked(mv);
                }
                inner.changed_game();
                inner.game = game;
                self.schedule(hub, &mut inner);
                self.changed.notify_all();
                Ok(inner.state())
            }
        }
    }

    /// Starts a search when an engine is to move and none runs.
    fn schedule(self: &Arc<Self>, hub: &Arc<Hub>, inner: &mut Inner) {
        // Nobody watching: no search. Without this check a search stopped
        // because its last stream closed would, on handing its engine back,
        // start again and hold its slot with no one left to stop it.
        if inner.search.is_some() || inner.game.outcome().is_some() || inner.streams == 0 {
            return;
        }
        let side = inner.game.position().side_to_move();
        // Absent while a cancelled search still holds it; that thread
        // schedules again when it hands it back.
        let Some((mut engine, name)) = inner.engines[side.index()].take() else {
            return;
        };
        let control = Arc::new(SearchControl::default());
        inner.search = Some(Arc::clone(&control));
        inner.version += 1;
        let game = inner.game.clone();
        let (generation, epoch) = (inner.generation, inner.seat_epoch);
        let (session, hub) = (Arc::clone(self), Arc::clone(hub));
        std::thread::spawn(move || {
            let slot = match hub.slots.try_acquire() {
                Some(slot) => Some(slot),
                None => {
                    session.set_waiting(generation, true);
                    let slot = hub.slots.acquire(&control);
                    session.set_waiting(generation, false);
                    slot
                }
            };
            let result = slot.map(|_slot| {
                engine.think(&game, &name, &control, &mut |thinking| {
                    session.publish_thinking(generation, thinking);
                })
            });
            let searched = Searched {
                side,
                epoch,
                generation,
                control,
            };
            session.finish(&hub, (engine, name), searched, result);
        });
    }

    fn set_waiting(&self, generation: u64, waiting: bool) {
        let mut inner = lock(&self.inner);
        if inner.generation == generation {
            inner.waiting = waiting;
            inner.version += 1;
            self.changed.notify_all();
        }
    }

    fn publish_thinking(&self, generation: u64, thinking: ThinkingMsg) {
        let mut inner = lock(&self.inner);
        if inner.generation == generation && inner.search.is_some() {
            inner.thinking = Some(thinking);
            inner.thinking_seq += 1;
            self.changed.notify_all();
        }
    }

    /// A search ended: reseats the engine and plays its move if the game
    /// is still the one it searched.
    fn finish(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        engine: (Engine, String),
        searched: Searched,
        result: Option<Result<Move, String>>,
    ) {
        let Searched {
            side,
            epoch,
            generation,
            control,
        } = searched;
        let mut inner = lock(&self.inner);
        let current = inner.generation == generation && !control.should_stop();
        if inner
            .search
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &control))
        {
            inner.search = None;
        }
        if inner.seat_epoch == epoch && inner.engines[side.index()].is_none() {
            inner.engines[side.index()] = Some(engine);
        }
        if current {
            match result {
                Some(Ok(mv)) => {
                    if let Err(e) = inner.game.play(mv) {
                        inner
                            .game
                            .adjudicate(Outcome::win(!side, Reason::Adjudication));
                        inner.note = Some(format!("the engine played an illegal move: {e}"));
                    }
                }
                Some(Err(why)) => {
                    inner
                        .game
                        .adjudicate(Outcome::win(!side, Reason::Adjudication));
                    inner.note = Some(format!("{} forfeits: {why}", side.name()));
                }
                None => {}
            }
            inner.generation += 1;
            // The last search stays on show (with its root FEN, so the page
            // knows it is about the position before the move).
            inner.waiting = false;
        }
        inner.version += 1;
        self.schedule(hub, &mut inner);
        self.changed.notify_all();
    }

    /// Waits up to `timeout` for something `cursor` has not sent yet.
    /// `None` on timeout (send a keep-alive).
    pub fn next_events(&self, cursor: &mut Cursor, timeout: Duration) -> Option<Vec<Event>> {
        let deadline = Instant::now() + timeout;
        let mut inner = lock(&self.inner);
        loop {
            let mut events = Vec::new();
            if inner.version != cursor.version {
                cursor.version = inner.version;
                events.push(Event::State(Box::new(inner.state())));
            }
            if inner.thinking_seq != cursor.thinking_seq {
                cursor.thinking_seq = inner.thinking_seq;
                if let Some(thinking) = &inner.thinking {
                    events.push(Event::Thinking(thinking.clone()));
                }
            }
            if !events.is_empty() {
                return Some(events);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            inner = self
                .changed
                .wait_timeout(inner, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// An event stream opened: the session is in use, and an engine to
    /// move starts (again) searching.
    pub fn attach(self: &Arc<Self>, hub: &Arc<Hub>) {
        let mut inner = lock(&self.inner);
        inner.streams += 1;
        inner.detached_since = None;
        self.schedule(hub, &mut inner);
    }

    /// An event stream closed; with none left, the search stops.
    pub fn detach(&self) {
        let mut inner = lock(&self.inner);
        inner.streams = inner.streams.saturating_sub(1);
        if inner.streams == 0 {
            inner.cancel_search();
            inner.version += 1;
            inner.detached_since = Some(Instant::now());
            tracing::debug!(session = %self.id, "last event stream closed: search stopped");
        }
    }
}
