//! SAN and PGN: every written form, lax input, round trips over random games,
//! and fuzzing of every text parser (they must return errors, never panic).

use engine::{
    parse_coordinate, read_pgn, read_pgns, write_pgn, Game, Move, Outcome, PgnError, Position,
    Reason, SanError, START_FEN,
};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn pos(fen: &str) -> Position {
    Position::from_fen(fen).unwrap_or_else(|e| panic!("{fen}: {e}"))
}

fn mv(text: &str) -> Move {
    parse_coordinate(text).unwrap()
}

/// Knights e2, e4, i2 all reach g3; rooks d10 and d1 both reach d5.
const DISAMBIGUATION: &str = "3R6/10/10/9k/10/10/4N5/10/4N3N1/K2R6 w - - 0 1";
const CAPTURES: &str = "9k/10/10/10/10/3p6/4P5/4N5/10/K9 w - - 0 1";
/// Black pawns d5 and d4; White's e2 pawn, after e2-e5, can be taken on e4 or e3.
const EN_PASSANT: &str = "9k/10/10/10/10/3p6/3p6/10/4P5/K9 w - - 0 1";
const CASTLING: &str = "r4k3r/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/R4K3R w KQkq - 0 1";
const PROMOTION: &str = "3r5k/4P5/10/10/10/10/10/10/10/K9 w - - 0 1";
/// Ra10 is mate: the black pawns on i9 and k9 box their king in.
const BACK_RANK: &str = "9k/8pp/10/10/10/10/10/10/R9/K9 w - - 0 1";
const CHECK: &str = "9k/9p/10/10/10/10/10/10/R9/K9 w - - 0 1";
/// Qi8 leaves Black no move without giving check: stalemate, no suffix.
const STALEMATE: &str = "9k/10/Q9/10/10/10/10/10/10/K9 w - - 0 1";

#[test]
fn san_is_written_and_read_in_every_form() {
    let cases = [
        (DISAMBIGUATION, "e2g3", "Ne2g3"),
        (DISAMBIGUATION, "e4g3", "N4g3"),
        (DISAMBIGUATION, "i2g3", "Nig3"),
        (DISAMBIGUATION, "e2c3", "N2c3"),
        (DISAMBIGUATION, "e4c5", "Nc5"),
        (DISAMBIGUATION, "d10d5", "R10d5"),
        (DISAMBIGUATION, "d1d5", "R1d5"),
        (DISAMBIGUATION, "d10h10", "Rh10"),
        (DISAMBIGUATION, "d10d7", "R10d7+"),
        (DISAMBIGUATION, "a1b2", "Kb2"),
        (CAPTURES, "e4e5", "e5"),
        (CAPTURES, "e4d5", "exd5"),
        (CAPTURES, "e3d5", "Nxd5"),
        (CASTLING, "f1i1", "O-O"),
        (CASTLING, "f1c1", "O-O-O"),
        (CASTLING, "e2e5", "e5"),
        (CASTLING, "a1d1", "Rd1"),
        (PROMOTION, "e9e10q", "e10=Q+"),
        (PROMOTION, "e9e10r", "e10=R+"),
        (PROMOTION, "e9e10b", "e10=B"),
        (PROMOTION, "e9e10n", "e10=N"),
        (PROMOTION, "e9d10q", "exd10=Q+"),
        (PROMOTION, "e9d10n", "exd10=N"),
        (BACK_RANK, "a2a10", "Ra10#"),
        (CHECK, "a2a10", "Ra10+"),
        (STALEMATE, "a8i8", "Qi8"),
    ];
    for (fen, coordinate, san) in cases {
        let p = pos(fen);
        let m = mv(coordinate);
        assert!(p.is_legal(m), "{fen} {coordinate}");
        assert_eq!(p.san(m), san, "{fen} {coordinate}");
        assert_eq!(p.parse_san(san), Ok(m), "{fen} {san}");
    }

    let black = pos(&CASTLING.replace(" w ", " b "));
    assert_eq!(black.san(mv("f10i10")), "O-O");
    assert_eq!(black.san(mv("f10c10")), "O-O-O");
    assert_eq!(black.parse_san("O-O-O"), Ok(mv("f10c10")));

    let stalemate = pos(STALEMATE).after(mv("a8i8"));
    assert!(!stalemate.in_check() && !stalemate.has_legal_moves());
}

#[test]
fn en_passant_is_an_ordinary_capture() {
    let p = pos(EN_PASSANT).after(mv("e2e5"));
    assert_eq!(p.san(mv("d5e4")), "dxe4");
    assert_eq!(p.san(mv("d4e3")), "dxe3");
    assert_eq!(p.parse_san("dxe3"), Ok(mv("d4e3")));
    assert_eq!(p.parse_san("dxe4 e.p."), Ok(mv("d5e4")));
    assert_eq!(p.parse_san("de3"), Ok(mv("d4e3")));
    // The pushes are still there and are not confused with the captures.
    assert_eq!(p.parse_san("d3"), Ok(mv("d4d3")));
    let after = p.after(mv("d4e3"));
    assert_eq!(after.piece_at("e5".parse().unwrap()), None);
}

#[test]
fn lax_forms_are_read() {
    // Each move and the lax ways of writing it that still read as it.
    let cases: &[(&str, &str, &[&str])] = &[
        (DISAMBIGUATION, "e2g3", &["Ne2-g3", "Ne2xg3", "e2g3"]),
        (DISAMBIGUATION, "i2g3", &["Nig3+!?", "Ni2g3"]),
        (DISAMBIGUATION, "d10d5", &["Rd10d5"]),
        (DISAMBIGUATION, "d10h10", &["Rh10"]),
        (DISAMBIGUATION, "d10d7", &["R10d7#"]),
        (DISAMBIGUATION, "d1d7", &["Rd1d7"]),
        (DISAMBIGUATION, "a1b2", &["Kab2"]),
        (DISAMBIGUATION, "e4c5", &[" Nc5 "]),
        (CAPTURES, "e4e5", &["Pe5"]),
        (CAPTURES, "e4d5", &["ed5", "e4xd5"]),
        (CAPTURES, "e3d5", &["Nd5"]),
        (CASTLING, "f1i1", &["0-0", "O-O+", "f1i1", "Ki1"]),
        (CASTLING, "f1c1", &["0-0-0", "o-o-o"]),
        (CASTLING, "e2e5", &["e2e5", "e2-e5"]),
        (PROMOTION, "e9e10q", &["e10Q", "e10=q", "e10=Q", "e9e10q"]),
        (PROMOTION, "e9e10n", &["e10n"]),
        (PROMOTION, "e9d10q", &["exd10Q+"]),
        (PROMOTION, "e9d10r", &["e9d10=R"]),
        (BACK_RANK, "a2a10", &["Ra10", "Ra10+", "Rxa10"]),
    ];
    for (fen, coordinate, texts) in cases {
        for text in *texts {
            assert_eq!(pos(fen).parse_san(text), Ok(mv(coordinate)), "{fen} {text}");
        }
    }
}

#[test]
fn san_errors_are_typed() {
    let syntax = |s: &str| SanError::Syntax(s.to_string());
    let illegal = |s: &str| SanError::Illegal(s.to_string());
    let ambiguous = |s: &str| SanError::Ambiguous(s.to_string());
    let cases = [
        (DISAMBIGUATION, "Ng3", ambiguous("Ng3")),
        (DISAMBIGUATION, "Neg3", ambiguous("Neg3")),
        (DISAMBIGUATION, "N2g3", ambiguous("N2g3")),
        (DISAMBIGUATION, "Rd5", ambiguous("Rd5")),
        (DISAMBIGUATION, "Rd7", ambiguous("Rd7")),
        (DISAMBIGUATION, "Nk5", illegal("Nk5")),
        (DISAMBIGUATION, "O-O", illegal("O-O")),
        (DISAMBIGUATION, "Rd11", syntax("Rd11")),
        (DISAMBIGUATION, "Nj3", syntax("Nj3")),
        (DISAMBIGUATION, "", syntax("")),
        (DISAMBIGUATION, "+", syntax("+")),
        (DISAMBIGUATION, "Né3", syntax("Né3")),
        (DISAMBIGUATION, "--", syntax("--")),
        (DISAMBIGUATION, "e2e2", illegal("e2e2")),
        (CAPTURES, "d5", illegal("d5")),
        (CAPTURES, "exf5", illegal("exf5")),
        (PROMOTION, "e10", illegal("e10")),
        (PROMOTION, "e10=K", syntax("e10=K")),
        (PROMOTION, "e10=P", syntax("e10=P")),
        (CASTLING, "O-O-O-O", syntax("O-O-O-O")),
        (CASTLING, "Ke2", illegal("Ke2")),
    ];
    for (fen, text, error) in cases {
        assert_eq!(pos(fen).parse_san(text), Err(error), "{fen} {text:?}");
    }
}

/// A random game from `start` of at most `max_plies`, stopping when the
/// game is decided.
fn random_game(rng: &mut SmallRng, start: Position, max_plies: usize) -> Game {
    let mut game = Game::new(start);
    while game.moves().len() < max_plies && game.outcome().is_none() {
        let moves = game.position().legal_moves();
        game.play_unchecked(moves[rng.random_range(0..moves.len())]);
    }
    game
}

/// Plays `games` random games of up to 150 plies and checks that the SAN of
/// every legal move of every position reads back as that move. Returns
/// (positions, moves, mates) seen.
fn check_random_games(seed: u64, games: usize) -> (usize, usize, usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut positions, mut checked, mut mates) = (0, 0, 0);
    for _ in 0..games {
        let mut p = Position::start();
        for _ in 0..150 {
            let moves = p.legal_moves();
            if moves.is_empty() {
                break;
            }
            positions += 1;
            let mut written: Vec<String> = Vec::with_capacity(moves.len());
            for &m in &moves {
                let san = p.san(m);
                assert_eq!(p.parse_san(&san), Ok(m), "{p:?} {m} {san}");
                if san.ends_with('#') {
                    mates += 1;
                }
                written.push(san);
                checked += 1;
            }
            written.sort();
            written.dedup();
            assert_eq!(written.len(), moves.len(), "{p:?}");
            p = p.after(moves[rng.random_range(0..moves.len())]);
        }
    }
    (positions, checked, mates)
}

#[test]
fn every_legal_move_of_random_games_reads_back() {
    // 1000 games in four threads, to keep the test short.
    let counts: Vec<_> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|seed| s.spawn(move || check_random_games(0x5a11 + seed, 250)))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let positions: usize = counts.iter().map(|c| c.0).sum();
    let checked: usize = counts.iter().map(|c| c.1).sum();
    let mates: usize = counts.iter().map(|c| c.2).sum();
    assert!(positions > 50_000, "{positions} positions");
    assert!(checked > 2_000_000, "{checked} moves");
    assert!(mates > 0);
}

#[test]
fn pgn_round_trips_random_games() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut games = Vec::new();
    for i in 0..400 {
        // Every fourth game starts from a position reached by random moves,
        // which has en passant, rule 5/6 fields or Black to move.
        let start = if i % 4 == 0 {
            let plies = rng.random_range(1..40);
            *random_game(&mut rng, Position::start(), plies).position()
        } else {
            Position::start()
        };
        let mut game = random_game(&mut rng, start, 150);
        if i % 3 == 0 && game.outcome().is_none() {
            game.adjudicate(Outcome::draw(Reason::Adjudication));
        }
        games.push(game);
    }
    let texts: Vec<String> = games
        .iter()
        .enumerate()
        .map(|(i, g)| write_pgn(g, &[("Round", i.to_string()), ("Event", "test".into())]))
        .collect();
    let all = texts.join("\n");
    let long = all
        .lines()
        .find(|l| l.len() >= 80 && !l.starts_with("[FEN "));
    assert_eq!(long, None);
    let read = read_pgns(&all).unwrap();
    assert_eq!(read.len(), games.len());
    let mut set_up = 0;
    for (i, (original, back)) in games.iter().zip(&read).enumerate() {
        assert_eq!(back.game.moves(), original.moves(), "game {i}");
        assert_eq!(back.game.start().fen(), original.start().fen(), "game {i}");
        assert_eq!(back.game.outcome(), original.outcome(), "game {i}");
        assert_eq!(back.tag("Round"), Some(i.to_string().as_str()));
        assert_eq!(back.tag("Event"), Some("test"));
        let single = read_pgn(&texts[i]).unwrap();
        assert_eq!(single.game.moves(), original.moves());
        if back.tag("SetUp").is_some() {
            set_up += 1;
            assert_eq!(back.tag("FEN"), Some(original.start().fen().as_str()));
        }
    }
    assert_eq!(set_up, 100);
}

#[test]
fn pgn_writer_layout() {
    let mut game = Game::new(Position::start());
    for san in ["e5", "e6", "Nhg3", "Nhg8"] {
        let m = game.position().parse_san(san).unwrap();
        game.play(m).unwrap();
    }
    let text = write_pgn(&game, &[("White", "Alice".into())]);
    assert_eq!(
        text,
        "[Event \"?\"]\n[Site \"?\"]\n[Date \"????.??.??\"]\n[Round \"?\"]\n\
         [White \"Alice\"]\n[Black \"?\"]\n[Result \"*\"]\n[Variant \"Chess-mix\"]\n\n\
         1. e5 e6 2. Ng3 Ng8 *\n"
    );

    // A Black-first start needs SetUp/FEN and `N...`.
    let start = Position::start().after(mv("e2e5"));
    let mut game = Game::new(start);
    game.play(mv("e9e6")).unwrap();
    game.play(mv("d2d4")).unwrap();
    let text = write_pgn(&game, &[]);
    assert!(text.contains("[SetUp \"1\"]\n"));
    assert!(text.contains(&format!("[FEN \"{}\"]\n", start.fen())));
    assert!(text.ends_with("\n\n1... e6 2. d4 *\n"), "{text}");
}

#[test]
fn finished_games_carry_result_and_termination() {
    let mut game = Game::new(pos(BACK_RANK));
    game.play(mv("a2a10")).unwrap();
    let text = write_pgn(&game, &[]);
    assert!(text.contains("[Result \"1-0\"]\n"));
    assert!(text.contains("[Termination \"checkmate\"]\n"));
    assert!(text.ends_with("1. Ra10# 1-0\n"), "{text}");
    let back = read_pgn(&text).unwrap();
    assert_eq!(back.game.outcome(), game.outcome());

    // The caller's Termination wins; a result the position does not decide
    // is read back as an adjudication.
    let mut game = Game::new(Position::start());
    game.play(mv("e2e5")).unwrap();
    game.adjudicate(Outcome::win(engine::Color::Black, Reason::Adjudication));
    let text = write_pgn(&game, &[("Termination", "time forfeit".into())]);
    assert!(text.contains("[Termination \"time forfeit\"]\n"));
    assert!(text.ends_with("1. e5 0-1\n"));
    assert_eq!(read_pgn(&text).unwrap().game.outcome(), game.outcome());

    // Random play soon fails the king-move quota at move 10.
    let mut rng = SmallRng::seed_from_u64(3);
    let game = (0..100)
        .map(|_| random_game(&mut rng, Position::start(), 150))
        .find(|g| g.outcome().map(|o| o.reason) == Some(Reason::KingQuota))
        .expect("some random game ends by the king-move quota");
    let text = write_pgn(&game, &[]);
    assert!(text.contains("[Termination \"king-quota\"]\n"));
    assert_eq!(read_pgn(&text).unwrap().game.outcome(), game.outcome());
}

#[test]
fn pgn_reader_skips_what_it_does_not_need() {
    let text = "\u{feff}% an escape line\n\
        [Event \"Two games\"]\n\
        [Variant \"chess-mix\"]\n\
        [Result \"1/2-1/2\"]\n\
        \n\
        1. e5 {a comment (with a paren} e6 $1 2.Nhg3! (2. Nig3 (2. d5) {x)} 2... d6) 2... \
        Nhg8?? ; to the end of the line ) {\n\
        {a comment\n over two lines}\n\
        3. Nh3 3... Nh8 1/2-1/2\n\
        \n\
        [Event \"second\"]\n\
        [Variant \"ChessMix\"]\n\
        [FEN \"9k/8pp/10/10/10/10/10/10/R9/K9 w - - 0 1\"]\n\
        1.Ra10+ 1-0\n\
        [Event \"third, no result\"]\n\
        e4 e7\n";
    let games = read_pgns(text).unwrap();
    assert_eq!(games.len(), 3);
    let first: Vec<String> = games[0].game.moves().iter().map(Move::to_string).collect();
    assert_eq!(first, ["e2e5", "e9e6", "h1g3", "h10g8", "i1h3", "i10h8"]);
    assert_eq!(games[0].tag("Event"), Some("Two games"));
    assert_eq!(
        games[0].game.outcome(),
        Some(Outcome::draw(Reason::Adjudication))
    );
    assert_eq!(games[1].game.moves(), [mv("a2a10")]);
    assert_eq!(
        games[1].game.outcome().map(|o| o.reason),
        Some(Reason::Checkmate)
    );
    assert_eq!(games[2].game.moves(), [mv("e2e4"), mv("e9e7")]);
    assert_eq!(games[2].game.outcome(), None);
    assert_eq!(read_pgn(text).unwrap().tag("Event"), Some("Two games"));

    assert!(read_pgns("").unwrap().is_empty());
    assert!(read_pgn("*").unwrap().game.moves().is_empty());
}

#[test]
fn pgn_errors_are_typed() {
    assert_eq!(
        read_pgn("[Variant \"Crazyhouse\"]\n1. e4 *").unwrap_err(),
        PgnError::Variant("Crazyhouse".into())
    );
    assert_eq!(
        read_pgn("[Variant \"Standard\"]\n*").unwrap_err(),
        PgnError::Variant("Standard".into())
    );
    assert!(matches!(
        read_pgn("[FEN \"8/8/8/8/8/8/8/8 w - - 0 1\"]\n*").unwrap_err(),
        PgnError::Fen(_)
    ));
    assert_eq!(
        read_pgn("1. e5 e6 2. e4 *").unwrap_err(),
        PgnError::Move {
            ply: 3,
            source: SanError::Illegal("e4".into())
        }
    );
    assert_eq!(
        read_pgn("[Event \"x\n\"]").unwrap_err(),
        PgnError::Unterminated {
            line: 1,
            what: "tag value"
        }
    );
    assert_eq!(read_pgn("").unwrap_err(), PgnError::Empty);
}

/// Valid inputs for the parsers, to be mutated by the fuzz tests.
fn samples() -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(11);
    let game = random_game(&mut rng, Position::start(), 60);
    let midgame = *random_game(&mut rng, Position::start(), 30).position();
    let mut out: Vec<String> = [
        "Nhg3", "R10d5", "exd10=Q+", "O-O-O", "0-0", "e10n", "Qxf10#", "e2e5", "f10c10", "e9e10q",
        "k10", START_FEN,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    out.push(midgame.fen());
    out.push(write_pgn(&game, &[("Event", "fuzz".into())]));
    out.push(write_pgn(&Game::new(midgame), &[]));
    out.push("[A \"\\\"\"] 1. e5 {c} (1. e4 (1. d4)) $3 ; x\n1... e6 1-0".into());
    out
}

/// Inserts, deletes or replaces one char at a char boundary.
fn mutate(text: &str, at: prop::sample::Index, op: u8, c: char) -> String {
    let boundaries: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let i = boundaries[at.index(boundaries.len())];
    let next = text[i..].chars().next().map_or(i, |c| i + c.len_utf8());
    match op {
        0 => format!("{}{c}{}", &text[..i], &text[i..]),
        1 => format!("{}{}", &text[..i], &text[next..]),
        _ => format!("{}{c}{}", &text[..i], &text[next..]),
    }
}

fn parse_everything(text: &str, positions: &[Position]) {
    for p in positions {
        if let Ok(m) = p.parse_san(text) {
            assert!(p.is_legal(m), "{text:?} gave illegal {m}");
        }
    }
    let _ = parse_coordinate(text);
    let _ = Position::from_fen(text);
    let _ = read_pgn(text);
    let _ = read_pgns(text);
}

fn fuzz_positions() -> Vec<Position> {
    vec![
        Position::start(),
        pos(PROMOTION),
        pos(DISAMBIGUATION),
        pos(EN_PASSANT).after(mv("e2e5")),
    ]
}

/// Chars that matter to the parsers, plus any char at all.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(
            "abcdefghijkNBRQKPOo0123456789x=+#-./ \n\"[]{}()$;!?*\\é€😀\u{feff}"
                .chars()
                .collect::<Vec<_>>()
        ),
        1 => any::<char>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn parsers_survive_random_text(text in "\\PC{0,40}") {
        parse_everything(&text, &fuzz_positions());
    }

    #[test]
    fn parsers_survive_notation_like_text(
        chars in prop::collection::vec(interesting_char(), 0..24)
    ) {
        let text: String = chars.into_iter().collect();
        parse_everything(&text, &fuzz_positions());
    }

    #[test]
    fn parsers_survive_mutated_valid_input(
        sample in any::<prop::sample::Index>(),
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0u8..3, interesting_char()),
            1..5,
        ),
    ) {
        let samples = samples();
        let mut text = samples[sample.index(samples.len())].clone();
        for (at, op, c) in edits {
            text = mutate(&text, at, op, c);
        }
        parse_everything(&text, &fuzz_positions());
    }
}

#[test]
fn pieces_taken_off_take_their_castling_rights_and_are_checked() {
    let sq = |s: &str| s.parse::<engine::Square>().unwrap();
    let start = Position::start();
    let pos = start
        .without_pieces([sq("k1"), sq("e9"), sq("b10")].into_iter().collect())
        .unwrap();
    assert_eq!(
        pos.fen(),
        "r1nbqkbnnr/pppp1ppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNN1 w Qkq - 0 1"
    );
    assert_eq!(pos.key(), Position::from_fen(&pos.fen()).unwrap().key());
    // A king, or the last blocker before a king of the side not to move.
    assert!(start.without_pieces(sq("f10").into()).is_err());
    let pinned = Position::from_fen("5k4/10/10/5b4/10/10/10/10/10/5K4 b - - 0 1").unwrap();
    let exposed = Position::from_fen("5k4/5r4/10/10/10/10/10/10/5B4/5K4 b - - 0 1").unwrap();
    assert!(pinned.without_pieces(sq("f7").into()).is_ok());
    assert!(exposed.without_pieces(sq("f2").into()).is_err());
}
