//! `mixzero serve` at the protocol level, without a browser: whole games
//! against the server's engines, every state checked against the engine
//! crate's own verdict, take-backs, FENs, promotion, a network's search,
//! the bound on searches and a closed stream stopping its search.

mod serve_common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use engine::players::{AlphaBeta, Player};
use engine::{Game, Position};
use serde_json::{json, Value};
use serve_common::*;

const LONG: Duration = Duration::from_secs(60);

/// The game the server's state describes, replayed by the engine crate.
fn replay(state: &Value) -> Game {
    let mut game = Game::new(Position::from_fen(state["start_fen"].as_str().unwrap()).unwrap());
    for mv in state["moves"].as_array().unwrap() {
        let mv = game
            .position()
            .parse_move(mv["uci"].as_str().unwrap())
            .unwrap();
        game.play(mv).unwrap();
    }
    game
}

/// The server's state agrees with the engine crate on the same moves.
fn check_against_engine(state: &Value) -> Game {
    let game = replay(state);
    let pos = game.position();
    assert_eq!(state["fen"], pos.fen());
    let legal: BTreeSet<String> = state["legal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["uci"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = match game.outcome() {
        Some(_) => BTreeSet::new(),
        None => pos.legal_moves().iter().map(|m| m.to_string()).collect(),
    };
    assert_eq!(legal, expected);
    match game.outcome() {
        None => assert!(state["outcome"].is_null(), "{}", state["outcome"]),
        Some(outcome) => {
            assert_eq!(state["outcome"]["result"], outcome.result());
            assert_eq!(state["outcome"]["reason"], outcome.reason.as_str());
        }
    }
    let white = &state["rules"]["white"];
    assert_eq!(
        white["must_move_king"],
        pos.must_move_king(engine::Color::White)
    );
    assert_eq!(
        white["banned_kind"].as_str(),
        pos.banned_kind(engine::Color::White).map(|k| k.name())
    );
    game
}

/// Starts a game from `fen` in which the commands play both sides, and
/// returns its state.
fn human_game(server: &Server, session: &str, fen: &str) -> Value {
    let (status, state) = command(
        server,
        session,
        json!({"type": "new_game", "white": "human", "black": "human", "fen": fen}),
    );
    assert_eq!(status, 200, "{state}");
    state
}

#[test]
fn a_full_game_against_alphabeta() {
    let server = Server::start(&["serve"]);
    let (session, _) = new_session(&server);
    let events = Events::open(&server, &session);
    let (status, state) = command(
        &server,
        &session,
        json!({"type": "new_game", "white": "human", "black": "alphabeta:1"}),
    );
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["players"], json!(["human", "alphabeta:1"]));
    // The human plays alpha-beta at depth 2, so the game ends by the rules.
    let mut human = AlphaBeta::new(2, 7);
    let mut state = state;
    let mut plies = 0;
    while state["outcome"].is_null() {
        assert!(plies < 2000, "no end after {plies} plies");
        let game = check_against_engine(&state);
        let mv = human.choose(&game);
        let (status, after) = command(
            &server,
            &session,
            json!({"type": "move", "move": mv.to_string()}),
        );
        assert_eq!(status, 200, "{after}");
        assert_eq!(
            after["moves"].as_array().unwrap().len(),
            game.moves().len() + 1
        );
        let played = game.moves().len() + 1;
        state = if after["outcome"].is_null() {
            // The stream may still hold older states: wait for the reply.
            events.state_until(LONG, |s| {
                let plies = s["moves"].as_array().unwrap().len();
                plies > played && (human_to_move(s) || !s["outcome"].is_null())
            })
        } else {
            after
        };
        plies = state["moves"].as_array().unwrap().len();
    }
    let game = check_against_engine(&state);
    assert!(game.outcome().is_some());
    eprintln!(
        "game over after {plies} plies: {} by {}",
        state["outcome"]["result"], state["outcome"]["reason"]
    );
    // Nothing more is accepted once the game is over.
    let any = "e2e4";
    let (status, reply) = command(&server, &session, json!({"type": "move", "move": any}));
    assert_eq!(status, 409, "{reply}");
}

#[test]
fn takebacks_fens_promotion_and_outcomes() {
    let server = Server::start(&["serve"]);
    let (session, first) = new_session(&server);
    assert_eq!(first["players"], json!(["human", "human"]));
    let events = Events::open(&server, &session);

    // Against an engine, a take-back returns to the human's turn.
    let new_game = json!({"type": "new_game", "white": "human", "black": "alphabeta:1"});
    assert_eq!(command(&server, &session, new_game).0, 200);
    let (status, _) = command(&server, &session, json!({"type": "move", "move": "e2e4"}));
    assert_eq!(status, 200);
    events.state_until(LONG, |s| {
        human_to_move(s) && s["moves"].as_array().unwrap().len() == 2
    });
    let (status, state) = command(&server, &session, json!({"type": "takeback"}));
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["moves"], json!([]));
    let (status, reply) = command(&server, &session, json!({"type": "takeback"}));
    assert_eq!(status, 400, "{reply}");
    assert!(reply["error"]
        .as_str()
        .unwrap()
        .contains("nothing to take back"));

    // Promotion from a FEN: the piece must be named.
    let state = human_game(
        &server,
        &session,
        "k9/4P5/10/10/10/10/10/10/10/5K4 w - - 0 1",
    );
    assert!(state["legal"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["uci"] == "e9e10q"));
    let (status, reply) = command(&server, &session, json!({"type": "move", "move": "e9e10"}));
    assert_eq!(status, 400, "{reply}");
    let (status, state) = command(&server, &session, json!({"type": "move", "move": "e9e10n"}));
    assert_eq!(status, 200, "{state}");
    assert!(state["moves"][0]["san"]
        .as_str()
        .unwrap()
        .starts_with("e10=N"));
    check_against_engine(&state);

    // Checkmate.
    human_game(
        &server,
        &session,
        "k9/10/2K7/10/10/10/10/1Q8/10/10 w - - 0 1",
    );
    let (status, state) = command(&server, &session, json!({"type": "move", "move": "b3b9"}));
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["outcome"]["reason"], "checkmate");
    assert_eq!(state["outcome"]["winner"], "white");
    check_against_engine(&state);

    // Bad FENs, finished starts and bad seats are refused; the game stays.
    for (fen, white, needle) in [
        ("not a fen", "human", "bad FEN"),
        (
            "k9/10/10/10/10/10/10/10/10/9K w - - 0 1",
            "human",
            "already over",
        ),
        ("", "uci:/bin/sh", "not one of the engines"),
        ("", "net", "no network"),
        ("", "alphabeta:0", "bad player"),
    ] {
        let (status, reply) = command(
            &server,
            &session,
            json!({"type": "new_game", "white": white, "black": "human", "fen": fen}),
        );
        assert_eq!(status, 400, "{fen} {white}: {reply}");
        assert!(
            reply["error"].as_str().unwrap().contains(needle),
            "{needle}: {reply}"
        );
    }
    let (status, reply) = command(&server, &session, json!({"type": "takeback"}));
    assert_eq!(status, 200, "the mated game is still there: {reply}");
    assert!(reply["outcome"].is_null());
}

#[test]
fn a_network_shows_what_it_thinks() {
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("tiny.safetensors");
    save_tiny_net(&weights);
    let server = Server::start(&["serve", "--weights", weights.to_str().unwrap()]);
    let (status, info) = get(&format!("{}/api/info", server.url));
    assert_eq!(status, 200);
    let info: Value = serde_json::from_str(&info).unwrap();
    assert!(info["network"]
        .as_str()
        .unwrap()
        .ends_with("tiny.safetensors"));

    let (session, _) = new_session(&server);
    let events = Events::open(&server, &session);
    let new_game = json!({"type": "new_game", "white": "net:playouts=200", "black": "human"});
    let (status, state) = command(&server, &session, new_game);
    assert_eq!(status, 200, "{state}");
    // The final report and the state after the move, in either order.
    let (mut thinking, mut state) = (None, None);
    while thinking.is_none() || state.is_none() {
        let (name, value) = events.receiver.recv_timeout(LONG).expect("an event");
        if name == "thinking" && value["done"] == true {
            thinking = Some(value);
        } else if name == "state" && value["moves"].as_array().unwrap().len() == 1 {
            state = Some(value);
        }
    }
    let (thinking, state) = (thinking.unwrap(), state.unwrap());
    assert!(human_to_move(&state), "{state}");
    let top = thinking["top"].as_array().unwrap();
    assert!(!top.is_empty() && top.len() <= 8);
    let visits: Vec<u64> = top.iter().map(|m| m["visits"].as_u64().unwrap()).collect();
    assert!(visits.windows(2).all(|w| w[0] >= w[1]), "{visits:?}");
    assert!(visits[0] > 0);
    assert!(thinking["nodes"].as_u64().unwrap() >= 200, "{thinking}");
    assert!(!thinking["pv"].as_array().unwrap().is_empty());
    let wdl: f64 = thinking["white_wdl"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_f64().unwrap())
        .sum();
    assert!((wdl - 1.0).abs() < 1e-3, "{thinking}");
    // The move played heads the list (ranked as the move is chosen).
    assert_eq!(state["moves"][0]["uci"], top[0]["uci"], "{thinking}");
}

#[test]
fn searches_are_bounded_and_a_closed_stream_stops_its_search() {
    let server = Server::start(&["serve", "--max-searches", "1"]);
    // Tab A: a search that would run for minutes.
    let (a, _) = new_session(&server);
    let a_events = Events::open(&server, &a);
    let long = json!({"type": "new_game", "white": "alphabeta:16", "black": "human"});
    assert_eq!(command(&server, &a, long).0, 200);
    a_events.state_until(LONG, |s| s["thinking"] == true);

    // Tab B: its engine waits for the one slot and is told so.
    let (b, _) = new_session(&server);
    let b_events = Events::open(&server, &b);
    let quick = json!({"type": "new_game", "white": "alphabeta:1", "black": "human"});
    assert_eq!(command(&server, &b, quick).0, 200);
    b_events.state_until(LONG, |s| s["waiting"] == true);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        b_events
            .receiver
            .try_iter()
            .all(|(_, s)| s["moves"].as_array().is_none_or(|m| m.is_empty())),
        "B moved while A held the slot"
    );

    // Closing tab A stops its search: B gets the slot and moves.
    let closed = Instant::now();
    drop(a_events);
    b_events.state_until(LONG, |s| {
        human_to_move(s) && s["moves"].as_array().unwrap().len() == 1
    });
    assert!(
        closed.elapsed() < Duration::from_secs(10),
        "B waited {:?} after A closed",
        closed.elapsed()
    );
}
