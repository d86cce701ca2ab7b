//! The UCI protocol for Chess-mix engines: command parsing (`command`),
//! options (`options`), info lines (`info`) and the protocol loop
//! (`session`), with time management and limits from [`crate::search`], generic over a [`UciSearcher`] so that the
//! alpha-beta baseline here and a network-driven MCTS elsewhere share it.
//!
//! Moves are coordinate moves (RULES.md §8: `e2e5`, `f1i1`, `e9e10q`);
//! positions are the project's FEN, rule 5/6 fields included.

mod alphabeta;
mod command;
#[cfg(feature = "uci-harness")]
pub mod harness;
mod info;
mod options;
mod session;

pub use command::{parse_command, time_budget, Command, GoParams, UciError};
pub use options::{OptionError, OptionKind, OptionValue, UciOption};
pub use session::run_uci;
// What a searcher needs from the search layer, for protocol users.
pub use crate::search::{
    MoveStats, Score, SearchControl, SearchInfo, SearchLimits, TimeBudget, WdlPermille,
    HARD_PER_SOFT, MIN_SAFETY_MARGIN, MOVE_OVERHEAD, SAFETY_DIVISOR, SUDDEN_DEATH_MOVES,
};

use crate::game::Game;
use crate::position::Move;

/// A search engine that [`run_uci`] can drive.
pub trait UciSearcher: Send {
    fn id_name(&self) -> String;
    fn id_author(&self) -> String;
    fn options(&self) -> Vec<UciOption>;
    /// Sets the option `name` (as [`UciSearcher::options`] spells it) to a
    /// value already checked against its type; `Err` says why it was refused.
    fn set_option(&mut self, name: &str, value: &OptionValue) -> Result<(), String>;
    /// Forget what was learnt about the previous game.
    fn new_game(&mut self);
    /// A move for the current position of `game`, which has a legal move.
    /// Polls `limits.control` and returns soon after it says stop; calls
    /// `info` with progress. The move must be legal and, when
    /// `limits.searchmoves` is not empty, one of them.
    fn search(
        &mut self,
        game: &Game,
        limits: &SearchLimits,
        info: &mut dyn FnMut(&SearchInfo),
    ) -> Move;
}

#[cfg(test)]
mod tests {
    use std::io::{self, Write};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::error::{FenError, MoveError};
    use crate::eval::Wdl;
    use crate::position::{parse_coordinate, Position};
    use crate::types::{Color, Square};

    fn mv(text: &str) -> Move {
        parse_coordinate(text).unwrap()
    }

    fn go(line: &str) -> GoParams {
        match parse_command(line) {
            Ok(Command::Go(go)) => go,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn simple_commands_parse() {
        assert!(matches!(parse_command("uci"), Ok(Command::Uci)));
        assert!(matches!(
            parse_command("  isready \r\n"),
            Ok(Command::IsReady)
        ));
        assert!(matches!(
            parse_command("ucinewgame"),
            Ok(Command::UciNewGame)
        ));
        assert!(matches!(parse_command("stop"), Ok(Command::Stop)));
        assert!(matches!(parse_command("ponderhit"), Ok(Command::PonderHit)));
        assert!(matches!(parse_command("quit"), Ok(Command::Quit)));
        assert!(matches!(
            parse_command("debug on"),
            Ok(Command::Debug(true))
        ));
        assert!(matches!(
            parse_command("debug off"),
            Ok(Command::Debug(false))
        ));
    }

    #[test]
    fn bad_commands_are_typed_errors() {
        let err = |line| parse_command(line).unwrap_err();
        assert_eq!(err(""), UciError::Empty);
        assert_eq!(err("   "), UciError::Empty);
        assert_eq!(
            err("frobnicate"),
            UciError::UnknownCommand("frobnicate".into())
        );
        assert_eq!(err("UCI"), UciError::UnknownCommand("UCI".into()));
        assert!(matches!(
            err("isready now"),
            UciError::UnexpectedArguments { .. }
        ));
        assert_eq!(err("debug"), UciError::DebugSyntax);
        assert_eq!(err("debug maybe"), UciError::DebugSyntax);
        assert_eq!(err("setoption"), UciError::SetOptionSyntax);
        assert_eq!(err("setoption value 3"), UciError::SetOptionSyntax);
        assert_eq!(err("setoption name value 3"), UciError::SetOptionSyntax);
    }

    #[test]
    fn setoption_names_and_values_may_have_spaces() {
        let Ok(Command::SetOption { name, value }) =
            parse_command("setoption name Weights File value /tmp/my net.safetensors")
        else {
            panic!()
        };
        assert_eq!(name, "Weights File");
        assert_eq!(value.as_deref(), Some("/tmp/my net.safetensors"));
        let Ok(Command::SetOption { name, value }) = parse_command("setoption name Clear Hash")
        else {
            panic!()
        };
        assert_eq!(name, "Clear Hash");
        assert_eq!(value, None);
    }

    fn position(line: &str) -> Game {
        match parse_command(line) {
            Ok(Command::Position(game)) => *game,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn positions_parse_with_moves() {
        let game = position("position startpos");
        assert_eq!(game.position(), &Position::start());
        let game = position("position startpos moves e2e5 e9e7 f1e2");
        assert_eq!(game.moves().len(), 3);
        assert_eq!(
            game.position()
                .piece_at("e2".parse::<Square>().unwrap())
                .map(|p| p.kind),
            Some(crate::Kind::King)
        );
        let fen = "5k4/4ppp3/10/10/6n3/6R3/10/10/10/R4K4 w - - 0 17";
        let game = position(&format!("position fen {fen} moves a1a10"));
        assert_eq!(game.start().fen(), fen);
        assert_eq!(game.moves(), &[mv("a1a10")]);
        // The rule 5/6 extension fields are read.
        let game = position("position fen 5k4/10/10/10/10/10/10/10/10/R4K4 w - - 0 10 K -");
        assert!(game.position().king_moved_in_period(Color::White));
        assert!(!game.position().must_move_king(Color::White));
        assert_eq!(game.position().banned_kind(Color::White), None);
        let game = position("position fen 5k4/10/10/10/10/10/10/10/10/R4K4 w - - 0 12 - R2");
        assert_eq!(
            game.position().banned_kind(Color::White),
            Some(crate::Kind::Rook)
        );
        assert_eq!(position("position startpos moves").moves().len(), 0);
    }

    #[test]
    fn bad_positions_are_typed_errors() {
        let err = |line| parse_command(line).unwrap_err();
        assert_eq!(err("position"), UciError::PositionSyntax);
        assert_eq!(err("position startpos e2e5"), UciError::PositionSyntax);
        assert_eq!(err("position moves e2e5"), UciError::PositionSyntax);
        assert!(matches!(
            err("position fen"),
            UciError::Fen(FenError::FieldCount(0))
        ));
        assert!(matches!(
            err("position fen 10/10 w - - 0 1"),
            UciError::Fen(FenError::RankCount(2))
        ));
        assert!(matches!(
            err("position startpos moves e2e5 e9e7 e5e8"),
            UciError::Move {
                index: 3,
                source: MoveError::Illegal { .. }
            }
        ));
        assert!(matches!(
            err("position startpos moves j2j4"),
            UciError::Move {
                index: 1,
                source: MoveError::Syntax(_)
            }
        ));
        // Rule 6: a third knight move in a row is illegal.
        assert!(matches!(
            err("position startpos moves b1a3 b10a8 h1g3 h10g8 c1d3"),
            UciError::Move { index: 5, .. }
        ));
    }

    #[test]
    fn go_parameters_parse() {
        let g = go("go wtime 60000 btime -20 winc 500 binc 0 movestogo 12");
        assert_eq!(g.wtime, Some(ms(60_000)));
        assert_eq!(g.btime, Some(Duration::ZERO));
        assert_eq!(g.winc, Some(ms(500)));
        assert_eq!(g.binc, Some(Duration::ZERO));
        assert_eq!(g.movestogo, Some(12));
        let g = go("go movetime 250 nodes 10000 depth 7 mate 3");
        assert_eq!(g.movetime, Some(ms(250)));
        assert_eq!((g.nodes, g.depth, g.mate), (Some(10_000), Some(7), Some(3)));
        let g = go("go infinite searchmoves e2e5 f1i1 e2e5 ponder");
        assert!(g.infinite && g.ponder);
        assert_eq!(g.searchmoves, vec![mv("e2e5"), mv("f1i1")]);
        let g = go("go searchmoves e9e10q depth 2");
        assert_eq!(g.searchmoves, vec![mv("e9e10q")]);
        assert_eq!(g.depth, Some(2));
        assert_eq!(go("go"), GoParams::default());
    }

    #[test]
    fn bad_go_parameters_are_typed_errors() {
        let err = |line| parse_command(line).unwrap_err();
        assert_eq!(err("go depth"), UciError::MissingValue("depth"));
        assert!(matches!(
            err("go depth x"),
            UciError::BadValue { param: "depth", .. }
        ));
        assert!(matches!(err("go depth 0"), UciError::BadValue { .. }));
        assert!(matches!(err("go movestogo 0"), UciError::BadValue { .. }));
        assert!(matches!(err("go nodes -1"), UciError::BadValue { .. }));
        assert!(matches!(err("go wtime 1.5"), UciError::BadValue { .. }));
        assert!(matches!(
            err("go wtime 99999999999999999999"),
            UciError::BadValue { .. }
        ));
        assert_eq!(err("go fast"), UciError::UnknownGoParameter("fast".into()));
        assert_eq!(err("go searchmoves"), UciError::NoSearchMoves);
        assert_eq!(err("go searchmoves depth 3"), UciError::NoSearchMoves);
        assert!(matches!(
            err("go searchmoves e2e5 j2j4"),
            UciError::SearchMove(MoveError::Syntax(_))
        ));
    }

    fn budget(line: &str, side: Color) -> (Option<Duration>, Option<Duration>) {
        let b = time_budget(&go(line), side);
        (b.soft, b.hard)
    }

    #[test]
    fn no_clock_means_no_deadline() {
        assert_eq!(budget("go depth 5", Color::White), (None, None));
        assert_eq!(budget("go infinite wtime 1000", Color::White), (None, None));
        // Only the other side's clock.
        assert_eq!(budget("go btime 1000", Color::White), (None, None));
    }

    #[test]
    fn movetime_and_sudden_death_budgets() {
        // Go line, side to move, soft and hard budgets in ms.
        let rows = [
            // Movetime keeps an overhead.
            ("go movetime 1000", Color::White, 990, 990),
            ("go movetime 50", Color::Black, 40, 40),
            ("go movetime 6", Color::White, 3, 3),
            ("go movetime 0", Color::White, 0, 0),
            // Sudden death, 60 s: 3 s margin, 57 s usable, /30 moves.
            ("go wtime 60000 btime 1", Color::White, 1900, 7600),
            ("go wtime 1 btime 60000", Color::Black, 1900, 7600),
            // Below the margin there is nothing to spend: the searcher answers at once.
            ("go wtime 20", Color::White, 0, 0),
            ("go wtime 0 winc 1000", Color::White, 0, 0),
        ];
        for (line, side, soft, hard) in rows {
            let want = (Some(ms(soft)), Some(ms(hard)));
            assert_eq!(budget(line, side), want, "{line} ({side:?})");
        }
        // A clock that is tighter than movetime wins.
        assert_eq!(
            budget("go movetime 5000 wtime 1000", Color::White).1,
            budget("go wtime 1000", Color::White).1
        );
        // 1 s: a 50 ms margin (5%), 950 ms usable.
        assert_eq!(
            budget("go wtime 1000", Color::White),
            (Some(ms(950) / 30), Some(ms(950) / 30 * 4))
        );
    }

    #[test]
    fn increments_are_mostly_spent() {
        // 10 s + 1 s: 9.5 s usable, 316 ms share plus 750 ms of the increment.
        let (soft, hard) = budget("go wtime 10000 winc 1000", Color::White);
        let share = ms(9500) / 30 + ms(750);
        assert_eq!((soft, hard), (Some(share), Some(share * 4)));
        // A small clock with a big increment: still within the clock.
        let (soft, hard) = budget("go wtime 200 winc 5000", Color::White);
        assert_eq!((soft, hard), (Some(ms(170)), Some(ms(170))));
    }

    #[test]
    fn moves_to_go_divides_the_clock() {
        // 10 moves in 20 s: 19 s usable.
        let (soft, hard) = budget("go wtime 20000 movestogo 10", Color::White);
        assert_eq!((soft, hard), (Some(ms(1900)), Some(ms(7600))));
        // The last move before the control may use all the usable time.
        let (soft, hard) = budget("go btime 20000 movestogo 1", Color::Black);
        assert_eq!((soft, hard), (Some(ms(19_000)), Some(ms(19_000))));
        let (soft, hard) = budget("go wtime 20000 movestogo 2", Color::White);
        assert_eq!((soft, hard), (Some(ms(9_500)), Some(ms(9_500))));
    }

    #[test]
    fn hard_budget_never_reaches_the_flag() {
        for remaining in [
            0, 1, 10, 29, 30, 31, 100, 1_000, 10_000, 600_000, 10_800_000,
        ] {
            for inc in [0, 10, 100, 2_000, 30_000] {
                for mtg in ["", " movestogo 1", " movestogo 2", " movestogo 40"] {
                    for side in Color::ALL {
                        let line = format!(
                            "go wtime {remaining} btime {remaining} winc {inc} binc {inc}{mtg}"
                        );
                        let (soft, hard) = budget(&line, side);
                        let (soft, hard) = (soft.unwrap(), hard.unwrap());
                        let remaining = ms(remaining);
                        let margin = MIN_SAFETY_MARGIN.max(remaining / SAFETY_DIVISOR);
                        assert!(soft <= hard, "{line}");
                        assert!(hard <= remaining.saturating_sub(margin), "{line}");
                        assert!(hard <= soft * HARD_PER_SOFT, "{line}");
                    }
                }
            }
        }
    }

    #[test]
    fn control_deadlines_and_stop() {
        let control = SearchControl::timed(TimeBudget::default());
        assert!(!control.should_stop() && !control.soft_deadline_passed());
        control.stop();
        assert!(control.should_stop());

        let control = SearchControl::timed(TimeBudget {
            soft: Some(Duration::ZERO),
            hard: Some(Duration::ZERO),
        });
        assert!(control.should_stop() && control.soft_deadline_passed());

        let control = SearchControl::timed(TimeBudget {
            soft: Some(Duration::MAX),
            hard: Some(Duration::MAX),
        });
        assert!(!control.should_stop() && !control.soft_deadline_passed());

        let control = SearchControl::infinite();
        assert!(control.is_infinite() && !control.should_stop());
        control.ponderhit(TimeBudget {
            soft: Some(Duration::ZERO),
            hard: None,
        });
        assert!(!control.is_infinite());
        assert!(control.soft_deadline_passed() && !control.should_stop());
        control.wait_while_infinite();
    }

    #[test]
    fn info_lines_follow_uci() {
        let info = SearchInfo {
            depth: 3,
            seldepth: Some(7),
            nodes: 5000,
            time: ms(250),
            score: Score::Centipawns(-35),
            wdl: Some(WdlPermille {
                win: 200,
                draw: 500,
                loss: 300,
            }),
            pv: vec![mv("e2e5"), mv("e9e7")],
            moves: Vec::new(),
        };
        assert_eq!(
            info.to_string(),
            "info depth 3 seldepth 7 nodes 5000 nps 20000 time 250 score cp -35 \
             wdl 200 500 300 pv e2e5 e9e7"
        );
        let stats = [
            MoveStats {
                mv: mv("e2e5"),
                visits: 12,
                prior: 0.031,
                q: Some(-0.12345),
            },
            MoveStats {
                mv: mv("f1i1"),
                visits: 0,
                prior: 0.0005,
                q: None,
            },
        ];
        assert_eq!(
            stats.map(|s| s.to_string()),
            [
                "info string e2e5 N: 12 (P: 3.10%) (Q: -0.1235)",
                "info string f1i1 N: 0 (P: 0.05%) (Q: -)",
            ]
        );
        let info = SearchInfo {
            seldepth: None,
            time: Duration::ZERO,
            score: Score::Mate(-2),
            wdl: None,
            pv: Vec::new(),
            ..info
        };
        assert_eq!(
            info.to_string(),
            "info depth 3 nodes 5000 nps 5000000 time 0 score mate -2"
        );
    }

    #[test]
    fn wdl_permille_sums_to_a_thousand() {
        let wdl = WdlPermille::from(Wdl {
            win: 0.3336,
            draw: 0.3336,
            loss: 0.3328,
        });
        assert_eq!((wdl.win, wdl.draw, wdl.loss), (334, 333, 333));
        let wdl = WdlPermille::from(Wdl {
            win: 0.9,
            draw: 0.0,
            loss: 0.9,
        });
        assert_eq!(wdl.win + wdl.draw + wdl.loss, 1000);
    }

    #[test]
    fn options_print_and_check_values() {
        let spin = UciOption {
            name: "Depth".into(),
            kind: OptionKind::Spin {
                default: 16,
                min: 1,
                max: 16,
            },
        };
        assert_eq!(
            spin.to_string(),
            "option name Depth type spin default 16 min 1 max 16"
        );
        assert_eq!(spin.parse_value(Some("4")), Ok(OptionValue::Spin(4)));
        for bad in ["0", "17", "x", ""] {
            assert!(matches!(
                spin.parse_value(Some(bad)),
                Err(OptionError::BadValue { .. })
            ));
        }
        assert!(matches!(
            spin.parse_value(None),
            Err(OptionError::MissingValue { .. })
        ));

        // The other kinds: the option, how it prints, inputs it takes (and
        // their values) and inputs it refuses.
        let cases = [
            (
                UciOption {
                    name: "Ponder".into(),
                    kind: OptionKind::Check { default: false },
                },
                "option name Ponder type check default false",
                vec![(Some("true"), OptionValue::Check(true))],
                vec![Some("yes")],
            ),
            (
                UciOption {
                    name: "Style".into(),
                    kind: OptionKind::Combo {
                        default: "Normal".into(),
                        choices: vec!["Solid".into(), "Normal".into()],
                    },
                },
                "option name Style type combo default Normal var Solid var Normal",
                vec![(Some("solid"), OptionValue::Combo("Solid".into()))],
                vec![Some("Wild")],
            ),
            (
                UciOption {
                    name: "Clear Hash".into(),
                    kind: OptionKind::Button,
                },
                "option name Clear Hash type button",
                vec![(None, OptionValue::Button)],
                vec![Some("now")],
            ),
            (
                UciOption {
                    name: "Weights".into(),
                    kind: OptionKind::String {
                        default: String::new(),
                    },
                },
                "option name Weights type string default <empty>",
                vec![
                    (Some("a b"), OptionValue::String("a b".into())),
                    (Some("<empty>"), OptionValue::String(String::new())),
                ],
                vec![],
            ),
        ];
        for (option, line, accepted, refused) in cases {
            assert_eq!(option.to_string(), line);
            for (input, value) in accepted {
                assert_eq!(option.parse_value(input), Ok(value), "{line}: {input:?}");
            }
            for input in refused {
                assert!(option.parse_value(input).is_err(), "{line}: {input:?}");
            }
        }
    }

    /// Output that the test reads back after `run_uci` returns.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// A searcher that misbehaves: panics, or answers `e2e5` whatever the position.
    struct Faulty {
        panics: bool,
    }

    impl UciSearcher for Faulty {
        fn id_name(&self) -> String {
            "faulty".into()
        }
        fn id_author(&self) -> String {
            "tests".into()
        }
        fn options(&self) -> Vec<UciOption> {
            vec![UciOption {
                name: "Fussy".into(),
                kind: OptionKind::Check { default: false },
            }]
        }
        fn set_option(&mut self, _: &str, _: &OptionValue) -> Result<(), String> {
            Err("never happy".into())
        }
        fn new_game(&mut self) {}
        fn search(&mut self, _: &Game, _: &SearchLimits, _: &mut dyn FnMut(&SearchInfo)) -> Move {
            assert!(!self.panics, "a searcher bug");
            mv("e2e5")
        }
    }

    fn session(searcher: Faulty, input: &str) -> String {
        let out = Captured::default();
        run_uci(searcher, io::Cursor::new(input.to_string()), out.clone()).unwrap();
        out.text()
    }

    #[test]
    fn faulty_searchers_still_answer_legally() {
        let text = session(
            Faulty { panics: true },
            "position startpos moves e2e5\ngo depth 1\nquit\n",
        );
        assert!(
            text.contains("info string error: the search failed"),
            "{text}"
        );
        let best = text
            .lines()
            .last()
            .unwrap()
            .strip_prefix("bestmove ")
            .unwrap();
        let pos = Position::start().after(mv("e2e5"));
        assert!(pos.is_legal(mv(best)), "{text}");

        let text = session(
            Faulty { panics: false },
            "position startpos moves e2e5\ngo searchmoves e9e8\n",
        );
        assert!(text.contains("not allowed"), "{text}");
        assert_eq!(text.lines().last(), Some("bestmove e9e8"));
    }

    #[test]
    fn rejected_option_values_are_reported() {
        let text = session(
            Faulty { panics: false },
            "setoption name fussy value true\nsetoption name Fussy value 3\nsetoption name Nope\n",
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "info string error: option `Fussy`: never happy",
                "info string error: option `Fussy`: `3` is not `true` or `false`",
                "info string error: unknown option `Nope`",
            ]
        );
    }

    #[test]
    fn game_over_answers_the_null_move() {
        // Black is mated.
        let text = session(
            Faulty { panics: true },
            "position fen R4k4/4ppp3/10/10/10/10/10/10/10/5K4 b - - 1 17\ngo depth 1\n",
        );
        assert!(text.contains("info string no legal move"), "{text}");
        assert!(text.contains("1-0 by checkmate"), "{text}");
        assert_eq!(text.lines().last(), Some("bestmove 0000"));
    }
}
