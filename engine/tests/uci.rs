//! The UCI protocol end to end, through `engine::uci::harness`: scripted
//! sessions through `run_uci` with the alpha-beta searcher, a seeded stream
//! of valid and malformed commands, and the `mixchess uci` binary.

use std::process::Command as Process;

use engine::players::{AlphaBeta, MAX_DEPTH};
use engine::uci::harness::{
    assert_game_over_answer, assert_held_until, assert_infinite_until_stop, assert_king_moves,
    assert_legal_answer, assert_legal_answers, assert_quit_and_eof_answer, assert_random_sessions,
    best_move, errors, Gui, StreamConfig,
};
use engine::{parse_coordinate, Move};

fn alpha_beta() -> Gui {
    Gui::in_process(AlphaBeta::new(MAX_DEPTH, 0))
}

fn moves(texts: &[&str]) -> Vec<Move> {
    texts.iter().map(|t| parse_coordinate(t).unwrap()).collect()
}

#[test]
fn scripted_session() {
    let mut gui = alpha_beta();
    let hello = gui.hello();
    assert_eq!(hello[0], "id name mixchess alphabeta");
    assert!(hello[1].starts_with("id author "), "{hello:?}");
    assert!(hello.contains(&"option name Depth type spin default 16 min 1 max 16".to_string()));
    assert!(hello
        .iter()
        .any(|l| l.starts_with("option name Seed type spin")));
    assert!(gui.sync().is_empty());

    gui.send("ucinewgame");
    let pos = gui.set_position("position startpos moves e2e5 e9e7");
    let (info, best) = gui.go("go depth 2");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    assert!(info[0].starts_with("info depth 1 "), "{info:?}");
    assert!(info[1].starts_with("info depth 2 "), "{info:?}");
    assert!(info
        .iter()
        .all(|l| l.contains(" score ") && l.contains(" pv ")));

    assert_legal_answers(
        &mut gui,
        &pos,
        &[],
        &[
            "go movetime 50",
            "go wtime 300 btime 300 winc 10 binc 10",
            "go btime 1 wtime 0",
            "go nodes 500",
        ],
    );

    // A search held back by `infinite` ends only with `stop`, even once
    // its depth is reached.
    assert_held_until(&mut gui, &pos, "go infinite depth 2", "stop");
    assert_infinite_until_stop(&mut gui, &pos, "setoption name Depth value 3");

    // Pondering holds the answer until `ponderhit`.
    assert_held_until(&mut gui, &pos, "go ponder depth 2", "ponderhit");
    gui.send("ponderhit");
    assert_eq!(
        errors(&gui.sync()),
        ["info string error: `ponderhit` without a pondering search"]
    );

    gui.send("setoption name Depth value 0");
    gui.send("setoption name Depth value deep");
    gui.send("setoption name Hash value 16");
    gui.send("setoption name Depth");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 4, "{refused:?}");
    assert!(refused[0].contains("`0` is not a whole number from 1 to 16"));
    assert!(refused[2].contains("unknown option `Hash`"));
    gui.send("setoption name depth value 2");
    gui.send("setoption name Seed value 12345");
    assert!(gui.sync().is_empty());

    // An illegal move leaves the previous position in force.
    gui.send("position startpos moves e2e5 e9e7 e5e8");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 1, "{refused:?}");
    assert!(refused[0].contains("move 3"), "{refused:?}");
    let (_, best) = gui.go("go depth 2");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());

    let allowed = moves(&["a2a3", "k2k4"]);
    let (_, best) = gui.go("go depth 3 searchmoves a2a3 k2k4");
    assert_legal_answer(&best, &pos, &allowed, &gui.transcript());
    gui.send("go depth 3 searchmoves a2a3 a2a6");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("searchmoves: illegal move `a2a6`"),
        "{refused:?}"
    );

    gui.send("debug on");
    let (lines, best) = gui.go("go movetime 20");
    assert!(lines
        .iter()
        .any(|l| l.starts_with("info string time budget: soft 10 ms")));
    assert_legal_answer(&best, &pos, &[], &gui.transcript());

    gui.send("frobnicate");
    gui.send("go depth x");
    let refused = gui.sync();
    assert_eq!(errors(&refused).len(), 2, "{refused:?}");

    gui.send("quit");
    assert!(gui.close().is_empty());
}

#[test]
fn quit_and_eof_end_a_running_search_with_its_answer() {
    assert_quit_and_eof_answer(alpha_beta);
}

#[test]
fn rule_5_forces_king_moves() {
    let mut gui = alpha_beta();
    assert_king_moves(
        &mut gui,
        &[
            "go depth 3",
            "go movetime 30",
            "go nodes 200",
            "go wtime 100 btime 100",
        ],
    );
    // The rook takes the queen once the king has moved in this period
    // (the FEN extension says so).
    gui.send("position fen 5k4/10/10/10/10/10/10/q9/10/R4K4 w - - 0 10 K -");
    assert_eq!(best_move(&gui.go("go depth 3").1), "a1a3");

    // Boxed in at the deadline: White has lost by king-quota, no move to give.
    assert_game_over_answer(
        &mut gui,
        "position fen rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 10",
        "go depth 2",
        "0-1 by king-quota",
    );
    gui.send("quit");
    gui.close();
}

/// The alpha-beta searcher's options, as the random stream sets them.
fn alpha_beta_options() -> StreamConfig {
    StreamConfig {
        setoptions: [
            "setoption name Depth value 2",
            "setoption name depth value 3",
            "setoption name Seed value 9",
            "setoption name Depth value 17",
            "setoption name Depth value two",
            "setoption name Hash value 16",
            "setoption name Seed",
        ]
        .map(String::from)
        .to_vec(),
        option_accepted: Box::new(|name, value| {
            let value = value.and_then(|v| v.parse::<i64>().ok());
            match name.to_ascii_lowercase().as_str() {
                "depth" => value.is_some_and(|v| (1..=i64::from(MAX_DEPTH)).contains(&v)),
                "seed" => value.is_some_and(|v| v >= 0),
                _ => false,
            }
        }),
        max_nodes: 3000,
    }
}

#[test]
fn random_and_malformed_command_streams() {
    assert_random_sessions(alpha_beta, &alpha_beta_options());
}

#[test]
fn the_binary_speaks_uci() {
    let mut command = Process::new(env!("CARGO_BIN_EXE_mixchess"));
    command.arg("uci");
    let mut gui = Gui::binary(command).expect("mixchess runs");
    let hello = gui.hello();
    assert_eq!(hello[0], "id name mixchess alphabeta");
    assert!(gui.sync().is_empty());
    let pos = gui.set_position("position startpos moves e2e5 e9e7 f1e2");
    let (info, best) = gui.go("go depth 3");
    assert_eq!(info.len(), 3, "{info:?}");
    assert_legal_answer(&best, &pos, &[], &gui.transcript());
    assert_infinite_until_stop(&mut gui, &pos, "setoption name Seed value 1");
    gui.send("position startpos moves e2e5 e2e5");
    assert_eq!(errors(&gui.sync()).len(), 1);
    gui.send("quit");
    assert!(gui.close().is_empty());
}
