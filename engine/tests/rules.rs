//! One focused test per rule of ../../shared/RULES.md: exact legal move sets
//! and outcomes in positions built from FEN or reached by real moves.

mod common;

use std::collections::BTreeSet;

use engine::{Color, Game, Kind, Outcome, Piece, Position, Reason, Rules, Run, Square, START_FEN};

/// A board field from pieces such as `"Kf1 Ra1 kf10"` (FEN letters).
fn board(pieces: &str) -> String {
    let mut grid = [[None; 10]; 10];
    for item in pieces.split_whitespace() {
        let letter = item.chars().next().unwrap();
        let sq: Square = item[1..].parse().unwrap();
        grid[sq.rank() as usize][sq.file() as usize] = Some(letter);
    }
    let cells: Vec<Option<char>> = grid.iter().flatten().copied().collect();
    common::board_field(&cells.try_into().expect("100 squares"))
}

fn fen(pieces: &str, rest: &str) -> Position {
    let text = format!("{} {rest}", board(pieces));
    Position::from_fen(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn start_fen(text: &str) -> Position {
    Position::from_fen(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn play(mut pos: Position, moves: &str) -> Position {
    for text in moves.split_whitespace() {
        let mv = pos.parse_move(text).unwrap_or_else(|e| panic!("{e}"));
        pos = pos.play(mv).unwrap();
    }
    pos
}

fn game(start: Position, moves: &str) -> Game {
    let mut game = Game::new(start);
    for text in moves.split_whitespace() {
        let mv = game
            .position()
            .parse_move(text)
            .unwrap_or_else(|e| panic!("{e}"));
        game.play(mv).unwrap();
    }
    game
}

fn legal(pos: &Position) -> BTreeSet<String> {
    pos.legal_moves().iter().map(|m| m.to_string()).collect()
}

fn moves_from(pos: &Position, from: &str) -> BTreeSet<String> {
    let from: Square = from.parse().unwrap();
    pos.legal_moves()
        .iter()
        .filter(|m| m.from == from)
        .map(|m| m.to_string())
        .collect()
}

fn set(moves: &str) -> BTreeSet<String> {
    moves.split_whitespace().map(str::to_string).collect()
}

fn is_legal(pos: &Position, text: &str) -> bool {
    pos.parse_move(text).is_ok()
}

fn at(pos: &Position, sq: &str) -> Option<Piece> {
    pos.piece_at(sq.parse().unwrap())
}

fn white(kind: Kind) -> Option<Piece> {
    Some(Piece::new(Color::White, kind))
}

fn black(kind: Kind) -> Option<Piece> {
    Some(Piece::new(Color::Black, kind))
}

/// The castling field of the FEN.
fn castling_field(pos: &Position) -> String {
    pos.fen().split(' ').nth(2).unwrap().to_string()
}

// §1-2

#[test]
fn board_is_ten_by_ten_without_j_file() {
    assert_eq!(Square::all().count(), 100);
    assert_eq!("a1".parse::<Square>().unwrap().index(), 0);
    assert_eq!("k1".parse::<Square>().unwrap().index(), 9);
    assert_eq!("k10".parse::<Square>().unwrap().index(), 99);
    assert!("j1".parse::<Square>().is_err());
    assert!("a11".parse::<Square>().is_err());
}

#[test]
fn start_position_has_the_pieces_of_rules_md_and_38_moves() {
    let pos = start_fen(START_FEN);
    assert_eq!(pos.fen(), START_FEN);
    let back = [
        Kind::Rook,
        Kind::Knight,
        Kind::Knight,
        Kind::Bishop,
        Kind::Queen,
        Kind::King,
        Kind::Bishop,
        Kind::Knight,
        Kind::Knight,
        Kind::Rook,
    ];
    for (file, &kind) in back.iter().enumerate() {
        let file = file as u8;
        assert_eq!(
            pos.piece_at(Square::from_coords(file, 0)),
            white(kind),
            "{file}"
        );
        assert_eq!(
            pos.piece_at(Square::from_coords(file, 1)),
            white(Kind::Pawn)
        );
        assert_eq!(
            pos.piece_at(Square::from_coords(file, 8)),
            black(Kind::Pawn)
        );
        assert_eq!(pos.piece_at(Square::from_coords(file, 9)), black(kind));
    }
    assert_eq!(pos.occupied().count(), 40);
    assert_eq!(pos.king(Color::White).to_string(), "f1");
    assert_eq!(pos.king(Color::Black).to_string(), "f10");

    let mut expected = set("b1a3 b1c3 c1b3 c1d3 h1g3 h1i3 i1h3 i1k3");
    for file in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "k"] {
        for to in 3..=5 {
            expected.insert(format!("{file}2{file}{to}"));
        }
    }
    assert_eq!(legal(&pos), expected);
    assert_eq!(pos.count_legal_moves(), 38);
    // Black's reply set mirrors White's.
    assert_eq!(play(pos, "e2e5").count_legal_moves(), 38);
}

// §3

#[test]
fn pawns_step_one_two_or_three_from_the_initial_rank_only() {
    let pos = start_fen(START_FEN);
    assert_eq!(moves_from(&pos, "e2"), set("e2e3 e2e4 e2e5"));
    let pos = play(pos, "e2e3");
    assert_eq!(moves_from(&pos, "e9"), set("e9e8 e9e7 e9e6"));
    // Having left its initial rank, a pawn steps one square only.
    let pos = play(pos, "e9e8");
    assert_eq!(moves_from(&pos, "e3"), set("e3e4"));
    assert!(!is_legal(&pos, "e3e5"));
    let pos = play(pos, "a2a3");
    assert_eq!(moves_from(&pos, "e8"), set("e8e7"));

    // Every square passed over and landed on must be empty.
    let blocked_third = fen("Kf1 Pe2 kf10 ne5", "w - - 0 1");
    assert_eq!(moves_from(&blocked_third, "e2"), set("e2e3 e2e4"));
    let blocked_second = fen("Kf1 Pe2 kf10 ne4", "w - - 0 1");
    assert_eq!(moves_from(&blocked_second, "e2"), set("e2e3"));
    let blocked_first = fen("Kf1 Pe2 kf10 ne3", "w - - 0 1");
    assert_eq!(moves_from(&blocked_first, "e2"), set(""));
}

#[test]
fn pawns_capture_diagonally_forward() {
    let pos = fen("Kf1 Pe4 kf10 nd5 nf5 pe5 nd3", "w - - 0 1");
    assert_eq!(moves_from(&pos, "e4"), set("e4d5 e4f5"));
}

#[test]
fn promotion_to_queen_rook_bishop_or_knight() {
    let pos = fen("Kf1 Pa9 Rb1 kf10 rb10 pa2", "w - - 0 1");
    assert_eq!(
        moves_from(&pos, "a9"),
        set("a9a10q a9a10r a9a10b a9a10n a9b10q a9b10r a9b10b a9b10n")
    );
    assert!(!pos.is_legal(engine::Move::new(
        "a9".parse().unwrap(),
        "a10".parse().unwrap()
    )));
    let promoted = play(pos, "a9b10n");
    assert_eq!(at(&promoted, "b10"), white(Kind::Knight));
    assert_eq!(at(&promoted, "a9"), None);

    let pos = play(pos, "f1g2");
    assert_eq!(
        moves_from(&pos, "a2"),
        set("a2a1q a2a1r a2a1b a2a1n a2b1q a2b1r a2b1b a2b1n")
    );
    assert_eq!(at(&play(pos, "a2a1r"), "a1"), black(Kind::Rook));
}

#[test]
fn en_passant_example_of_rules_md() {
    // Black pawns d5 and d4; White plays e2-e5 past e3 and e4.
    let pos = fen("Kf1 Pe2 kf10 pd5 pd4", "w - - 0 1");
    let pos = play(pos, "e2e5");
    assert!(pos.fen().contains(" e3e4 "), "{}", pos.fen());
    assert_eq!(
        legal(&pos),
        set("d5e4 d4e3 d4d3 f10e10 f10g10 f10e9 f10f9 f10g9")
    );
    for (mv, lands) in [("d5e4", "e4"), ("d4e3", "e3")] {
        let after = play(pos, mv);
        assert_eq!(at(&after, "e5"), None, "{mv} removes the e5 pawn");
        assert_eq!(at(&after, lands), black(Kind::Pawn));
        assert_eq!(at(&after, &mv[..2]), None);
        assert_eq!(after.halfmove_clock(), 0);
    }

    // The right lasts one move only.
    let later = play(pos, "f10f9 f1f2");
    assert_eq!(later.en_passant(), None);
    assert!(!is_legal(&later, "d5e4"));
    assert!(!is_legal(&later, "d4e3"));

    // A 2-square step passes e3 only: d4xe3 e.p., and d5xe4 is an ordinary capture.
    let pos = play(fen("Kf1 Pe2 kf10 pd5 pd4", "w - - 0 1"), "e2e4");
    assert!(pos.fen().contains(" e3 "), "{}", pos.fen());
    assert_eq!(moves_from(&pos, "d4"), set("d4e3 d4d3"));
    assert_eq!(at(&play(pos, "d4e3"), "e4"), None);
}

#[test]
fn captures_include_en_passant() {
    let pos = play(fen("Kf1 Pe2 kf10 pd5 pd4", "w - - 0 1"), "e2e5");
    let captures: Vec<String> = pos
        .legal_moves()
        .into_iter()
        .filter(|&mv| pos.is_capture(mv))
        .map(|mv| mv.to_string())
        .collect();
    assert_eq!(captures, ["d4e3", "d5e4"].map(String::from).to_vec());
    let pos = play(fen("Kf1 Pe2 kf10 pd5 pd4", "w - - 0 1"), "e2e4");
    for (mv, capture) in [
        ("d4e3", true),
        ("d5e4", true),
        ("d4d3", false),
        ("f10e10", false),
    ] {
        assert_eq!(pos.is_capture(pos.parse_move(mv).unwrap()), capture, "{mv}");
    }
}

#[test]
fn en_passant_that_exposes_the_king_is_illegal() {
    // After e2-e4, d4xe3 would empty rank 4 between the rook and the king.
    let pos = play(fen("Kf1 Pe2 Rk4 ka4 pd4", "w - - 0 1"), "e2e4");
    assert!(pos.en_passant().is_some());
    assert_eq!(moves_from(&pos, "d4"), set("d4d3"));
}

// §4

const CASTLING_BOARD: &str = "Kf1 Ra1 Rk1 kf10 ra10 rk10";

#[test]
fn castling_both_sides_for_both_colours() {
    // Side to move, its colour, its back rank, the king's moves and the
    // castling rights left once it has castled short.
    let cases = [
        (
            "w",
            Color::White,
            1,
            "f1e1 f1g1 f1e2 f1f2 f1g2 f1i1 f1c1",
            "kq",
        ),
        (
            "b",
            Color::Black,
            10,
            "f10e10 f10g10 f10e9 f10f9 f10g9 f10i10 f10c10",
            "KQ",
        ),
    ];
    for (side, colour, rank, king_moves, rights_left) in cases {
        let pos = fen(CASTLING_BOARD, &format!("{side} KQkq - 0 1"));
        let sq = |file: char| format!("{file}{rank}");
        let own = |kind| Some(Piece::new(colour, kind));
        assert_eq!(moves_from(&pos, &sq('f')), set(king_moves));
        let short = play(pos, &format!("{}{}", sq('f'), sq('i')));
        assert_eq!(at(&short, &sq('i')), own(Kind::King));
        assert_eq!(at(&short, &sq('h')), own(Kind::Rook));
        assert_eq!((at(&short, &sq('f')), at(&short, &sq('k'))), (None, None));
        assert_eq!(castling_field(&short), rights_left);
        let long = play(pos, &format!("{}{}", sq('f'), sq('c')));
        assert_eq!(at(&long, &sq('c')), own(Kind::King));
        assert_eq!(at(&long, &sq('d')), own(Kind::Rook));
        assert_eq!((at(&long, &sq('f')), at(&long, &sq('a'))), (None, None));
    }
}

#[test]
fn castling_out_of_through_or_into_attack_is_illegal() {
    // An enemy rook on this file of rank 3 (rank 8 for Black) attacks the
    // king's file square; expected (short legal, long legal).
    let cases = [
        ("a", true, true),
        ("b", true, true), // b1 must be empty but may be attacked
        ("c", true, false),
        ("d", true, false),
        ("e", true, false),
        ("f", false, false), // in check
        ("g", false, true),
        ("h", false, true),
        ("i", false, true),
        ("k", true, true), // the rook may be attacked
    ];
    for (file, short, long) in cases {
        let pos = fen(&format!("{CASTLING_BOARD} r{file}3"), "w KQkq - 0 1");
        assert_eq!(is_legal(&pos, "f1i1"), short, "white, rook on {file}3");
        assert_eq!(is_legal(&pos, "f1c1"), long, "white, rook on {file}3");
        let pos = fen(&format!("{CASTLING_BOARD} R{file}8"), "b KQkq - 0 1");
        assert_eq!(is_legal(&pos, "f10i10"), short, "black, rook on {file}8");
        assert_eq!(is_legal(&pos, "f10c10"), long, "black, rook on {file}8");
    }
}

#[test]
fn castling_needs_the_squares_between_empty() {
    for (file, short, long) in [
        ("b", true, false),
        ("c", true, false),
        ("d", true, false),
        ("e", true, false),
        ("g", false, true),
        ("h", false, true),
        ("i", false, true),
    ] {
        let pos = fen(
            &format!("{CASTLING_BOARD} N{file}1 n{file}10"),
            "w KQkq - 0 1",
        );
        assert_eq!(is_legal(&pos, "f1i1"), short, "piece on {file}1");
        assert_eq!(is_legal(&pos, "f1c1"), long, "piece on {file}1");
        let pos = fen(
            &format!("{CASTLING_BOARD} N{file}1 n{file}10"),
            "b KQkq - 0 1",
        );
        assert_eq!(is_legal(&pos, "f10i10"), short, "piece on {file}10");
        assert_eq!(is_legal(&pos, "f10c10"), long, "piece on {file}10");
    }
}

#[test]
fn castling_rights_are_lost_by_king_and_rook_moves_and_rook_captures() {
    let pos = fen(CASTLING_BOARD, "w KQkq - 0 1");
    // The king goes and comes back: both rights gone.
    let back = play(pos, "f1e1 f10e10 e1f1 e10f10");
    assert_eq!(castling_field(&back), "-");
    assert_eq!(back.castling_rights(), engine::Castles::NONE);
    assert_eq!(moves_from(&back, "f1"), set("f1e1 f1g1 f1e2 f1f2 f1g2"));

    // A rook goes and comes back: that side's right only.
    let back = play(pos, "k1k2 a10a9 k2k1 a9a10");
    assert_eq!(castling_field(&back), "Qk");
    assert!(!is_legal(&back, "f1i1"));
    assert!(is_legal(&back, "f1c1"));
    let back = play(back, "f1f2");
    assert!(is_legal(&back, "f10i10"));
    assert!(!is_legal(&back, "f10c10"));

    // A captured rook takes its right with it.
    let pos = fen(&format!("{CASTLING_BOARD} Ni8 nb3"), "w KQkq - 0 1");
    let pos = play(pos, "i8k10");
    assert_eq!(castling_field(&pos), "KQq");
    let pos = play(pos, "b3a1");
    assert_eq!(castling_field(&pos), "Kq");
    assert!(is_legal(&pos, "f1i1"));
    assert!(!is_legal(&pos, "f1c1"));
}

// §5

/// A board where both kings can step and castle, with pawns to move.
const OPEN_KINGS: &str = "r4k3r/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/R4K3R";

fn white_forced(n: u32) -> bool {
    n == 10 || (n > 10 && n % 10 == 5)
}

fn black_forced(n: u32) -> bool {
    n % 10 == 0
}

#[test]
fn control_period_ends_allow_only_king_moves() {
    for n in 1..=60u32 {
        for (side, forced, moved_field) in
            [("w", white_forced(n), "K"), ("b", black_forced(n), "k")]
        {
            let pos = start_fen(&format!("{OPEN_KINGS} {side} KQkq - 0 {n}"));
            let us = pos.side_to_move();
            let king = pos.king(us);
            let moves = pos.legal_moves();
            let only_king = moves.iter().all(|m| m.from == king);
            assert_eq!(only_king, forced, "{side} move {n}");
            assert_eq!(pos.must_move_king(us), forced, "{side} move {n}");
            if forced {
                let r = if us == Color::White { "1" } else { "10" };
                assert_eq!(
                    legal(&pos),
                    set(&format!("f{r}e{r} f{r}g{r} f{r}i{r} f{r}c{r}"))
                );
            }
            // The other side's obligation is judged at its own next move.
            let other_next = if us == Color::White { n } else { n + 1 };
            let other_forced = match us {
                Color::White => black_forced(other_next),
                Color::Black => white_forced(other_next),
            };
            assert_eq!(pos.must_move_king(!us), other_forced, "{side} move {n}");

            // A king move made earlier in the period frees the last move.
            let moved = start_fen(&format!("{OPEN_KINGS} {side} KQkq - 0 {n} {moved_field} -"));
            assert!(!moved.must_move_king(us), "{side} move {n}");
            assert!(moved.count_legal_moves() > 4, "{side} move {n}");
        }
    }
}

#[test]
fn control_periods_by_real_moves() {
    // White: king moves at 3 (frees 10), none in 11-14 (forced at 15), one at
    // 18 outside its periods (forced at 25 all the same), one at 33 (frees 35).
    // Black: none in 1-9 (forced at 10), one at 15 outside (forced at 20),
    // one at 27 (frees 30), none in 36-39 (forced at 40).
    let white_king_moves = [3, 18, 33];
    let black_king_moves = [15, 27];
    let expected_forced = [
        (Color::Black, 10),
        (Color::White, 15),
        (Color::Black, 20),
        (Color::White, 25),
        (Color::Black, 40),
    ];
    let cycles = [
        ["b1c3", "a1a2", "c3b1", "a2a1"],
        ["b10c8", "a10a9", "c8b10", "a9a10"],
    ];
    let mut pos = fen("Kf1 Ra1 Nb1 kf10 ra10 nb10", "w - - 0 1");
    let mut step = [0usize; 2];
    let mut forced = Vec::new();
    while pos.fullmove_number() <= 42 {
        let us = pos.side_to_move();
        let n = pos.fullmove_number() as u32;
        let king = pos.king(us);
        let moves = pos.legal_moves();
        let king_only = moves.iter().all(|m| m.from == king);
        assert!(!moves.is_empty());
        if king_only {
            forced.push((us, n));
        }
        let scheduled = match us {
            Color::White => white_king_moves.contains(&n),
            Color::Black => black_king_moves.contains(&n),
        };
        let text = if king_only || scheduled {
            let (home, aside) = match us {
                Color::White => ("f1", "g1"),
                Color::Black => ("f10", "g10"),
            };
            if king.to_string() == home {
                format!("{home}{aside}")
            } else {
                format!("{aside}{home}")
            }
        } else {
            let i = us.index();
            step[i] += 1;
            cycles[i][(step[i] - 1) % 4].to_string()
        };
        pos = play(pos, &text);
    }
    assert_eq!(forced, expected_forced);
}

#[test]
fn castling_counts_as_a_king_move_for_rule_5() {
    let pos = start_fen(&format!("{OPEN_KINGS} w KQkq - 0 9"));
    let castled = play(pos, "f1i1 a9a8");
    assert!(!castled.must_move_king(Color::White));
    assert!(moves_from(&castled, "e2").contains("e2e3"));
    let not_castled = play(pos, "a1b1 a9a8");
    assert!(not_castled.must_move_king(Color::White));
    assert_eq!(legal(&not_castled), set("f1e1 f1g1 f1i1"));
}

#[test]
fn unmet_king_obligation_loses_by_king_quota() {
    // The start position at move 10: the boxed-in king cannot move.
    let pos =
        start_fen("rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 10");
    assert!(!pos.in_check());
    assert!(pos.must_move_king(Color::White));
    assert_eq!(pos.count_legal_moves(), 0);
    assert_eq!(
        pos.outcome(),
        Some(Outcome::win(Color::Black, Reason::KingQuota))
    );
    let pos =
        start_fen("rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR b KQkq - 0 10");
    assert_eq!(
        pos.outcome(),
        Some(Outcome::win(Color::White, Reason::KingQuota))
    );

    // Reached by real moves (full.tsv r5_w10_quota_stalemate).
    let g = game(
        Position::start(),
        "a2a3 a9a8 b1c3 b10c8 a3a4 a8a7 c1b3 c10b8 a1a2 a10a8 h2h3 h9h8 h1g3 h10g8 \
         i2i4 i9i7 i1k3 i10k8",
    );
    assert_eq!(g.position().fullmove_number(), 10);
    assert!(!g.position().in_check());
    assert_eq!(
        g.outcome(),
        Some(Outcome::win(Color::Black, Reason::KingQuota))
    );
}

#[test]
fn check_whose_parries_are_not_king_moves_at_a_period_end_is_checkmate() {
    // full.tsv r5_w10_quota_checkmate: at White's move 10 the knight on g3
    // checks; only king moves are legal and the king has none.
    let g = game(
        Position::start(),
        "a2a3 h10i8 b1c3 i8h6 a3a4 a9a8 c1b3 h6i4 a1a2 a8a7 k2k3 b10a8 h1i3 a7a6 \
         k3k4 a8b6 b3c5 i4g3",
    );
    let pos = *g.position();
    assert!(pos.in_check());
    assert!(pos.must_move_king(Color::White));
    assert_eq!(pos.count_legal_moves(), 0);
    assert_eq!(
        g.outcome(),
        Some(Outcome::win(Color::Black, Reason::Checkmate))
    );
    // Without rule 5 the knight can be taken.
    let base = pos.with_rules(Rules::Base);
    assert_eq!(legal(&base), set("h2g3 f2g3"));
}

// §6

#[test]
fn third_consecutive_move_of_a_kind_is_illegal() {
    let pos = play(Position::start(), "b1a3 b10a8 h1g3");
    assert_eq!(
        pos.run(Color::White),
        Run {
            kind: Some(Kind::Knight),
            length: 2
        }
    );
    assert_eq!(pos.banned_kind(Color::White), Some(Kind::Knight));
    let pos = play(pos, "h10g8");
    // Other knights are banned too: the kind counts, not the piece.
    for mv in ["c1b3", "c1d3", "i1k3", "a3b5", "g3f5"] {
        assert!(!is_legal(&pos, mv), "{mv}");
    }
    let knights = pos.pieces(Color::White, Kind::Knight);
    assert!(pos.legal_moves().iter().all(|m| !knights.has(m.from)));
    assert_eq!(pos.count_legal_moves(), 25);
    // Another kind in between lifts the ban.
    let pos = play(pos, "e2e3");
    assert_eq!(pos.banned_kind(Color::Black), Some(Kind::Knight));
    assert!(!is_legal(&pos, "c10b8"));
    let pos = play(pos, "e9e8");
    assert_eq!(pos.banned_kind(Color::White), None);
    assert!(is_legal(&pos, "c1b3"));
}

#[test]
fn a_king_move_breaks_the_run() {
    let pos = play(
        Position::start(),
        "e2e3 e9e8 b1a3 b10a8 h1g3 h10g8 f1e2 f10e9",
    );
    assert_eq!(pos.run(Color::White), Run::default());
    let pos = play(pos, "c1b3 c10b8 i1k3 i10k8");
    assert_eq!(pos.banned_kind(Color::White), Some(Kind::Knight));
    assert!(!is_legal(&pos, "a3c4"));
}

#[test]
fn castling_is_a_king_move_for_rule_6() {
    // Two rook moves in a row; castling moves a rook but is a king move.
    let pos = start_fen(&format!("{OPEN_KINGS} w KQkq - 0 3 - R2"));
    assert_eq!(pos.banned_kind(Color::White), Some(Kind::Rook));
    assert!(!is_legal(&pos, "a1b1"));
    let castled = play(pos, "f1c1");
    assert_eq!(castled.run(Color::White), Run::default());
}

#[test]
fn promotion_and_en_passant_are_pawn_moves() {
    // Pawn step, then a promotion: pawns are banned, the new queen is not.
    let pos = fen("Kf1 Pa8 Pc2 kk10", "w - - 0 1");
    let pos = play(pos, "a8a9 k10k9 a9a10q k9k8");
    assert_eq!(pos.banned_kind(Color::White), Some(Kind::Pawn));
    assert!(moves_from(&pos, "c2").is_empty());
    assert!(is_legal(&pos, "a10a1"));
    // A pawn with two pawn moves behind it may not promote.
    let pos = fen("Kf1 Pa9 kk10", "w - - 0 3 - P2");
    assert_eq!(moves_from(&pos, "a9"), set(""));

    // Pawn step, then en passant: pawns are banned.
    let pos = fen("Kf1 Pa2 Pe7 kf10 pd9", "w - - 0 1");
    let pos = play(pos, "a2a3 d9d6 e7d8");
    assert_eq!(at(&pos, "d6"), None);
    assert_eq!(pos.banned_kind(Color::White), Some(Kind::Pawn));
    let pos = play(pos, "f10g10");
    assert_eq!(legal(&pos), set("f1e1 f1g1 f1e2 f1f2 f1g2"));
}

#[test]
fn rule_6_leaving_no_move_is_stalemate() {
    // The king's only square b1 is covered; both pawns are banned.
    let text = format!("{} w - - 0 5 - P2", board("Ka1 Pa2 Pb2 kk10 nd2"));
    let pos = start_fen(&text);
    assert!(!pos.in_check());
    assert_eq!(pos.count_legal_moves(), 0);
    assert_eq!(pos.outcome(), Some(Outcome::draw(Reason::Stalemate)));
    let free = start_fen(&text.replace("P2", "P1"));
    assert_eq!(legal(&free), set("a2a3 a2a4 a2a5 b2b3 b2b4 b2b5"));
    let base = Position::from_fen_with_rules(&text, Rules::Base).unwrap();
    assert_eq!(base.count_legal_moves(), 6);
}

#[test]
fn check_whose_only_parries_are_banned_is_checkmate() {
    // full.tsv r6_w06_checkmate_only_parry_is_pawn: Ng3+ can only be taken by
    // a pawn, and White has just moved pawns twice.
    let moves = "h1i3 h10i8 a2a3 i8h6 b1c3 a9a8 a3a4 h6i4 b2b3 i4g3";
    let g = game(Position::start(), moves);
    let pos = *g.position();
    assert!(pos.in_check());
    assert_eq!(pos.banned_kind(Color::White), Some(Kind::Pawn));
    assert_eq!(pos.count_legal_moves(), 0);
    assert_eq!(
        g.outcome(),
        Some(Outcome::win(Color::Black, Reason::Checkmate))
    );
    let base = game(
        Position::from_fen_with_rules(START_FEN, Rules::Base).unwrap(),
        moves,
    );
    assert_eq!(legal(base.position()), set("h2g3 f2g3"));
}

// §7

#[test]
fn classical_checkmate_and_stalemate() {
    let mated = play(fen("Ka8 Rk1 ka10", "w - - 0 32"), "k1k10");
    assert_eq!(
        mated.outcome(),
        Some(Outcome::win(Color::White, Reason::Checkmate))
    );
    let stalemated = play(fen("Ka8 Qb1 ka10", "w - - 0 32"), "b1b8");
    assert!(!stalemated.in_check());
    assert_eq!(stalemated.outcome(), Some(Outcome::draw(Reason::Stalemate)));
}

/// White and Black shuffle a knight and a rook out and back: 8 plies.
const SHUFFLE: &str = "b1c3 b10c8 a1a2 a10a9 c3b1 c8b10 a2a1 a9a10";
const SHUFFLE_BOARD: &str = "Kf1 Ra1 Nb1 kf10 ra10 nb10";

#[test]
fn threefold_repetition_draws() {
    let start = fen(SHUFFLE_BOARD, "w - - 0 1");
    let once = game(start, SHUFFLE);
    // The runs are now R1/r1 instead of none: the same position (§7).
    assert_eq!(once.position().key(), start.key());
    assert_eq!(once.repetitions(), 1);
    assert_eq!(once.outcome(), None);
    let twice = game(start, &format!("{SHUFFLE} {SHUFFLE}"));
    assert_eq!(twice.repetitions(), 2);
    assert_eq!(twice.outcome(), Some(Outcome::draw(Reason::Threefold)));
}

#[test]
fn a_different_rule_5_obligation_is_a_different_position() {
    // Black has moved its king already; White has not, so at move 10 the
    // third occurrence differs: White must move its king.
    let start = fen(SHUFFLE_BOARD, "w - - 0 2 k -");
    let once = game(start, SHUFFLE);
    assert_eq!(once.repetitions(), 1);
    let twice = game(start, &format!("{SHUFFLE} {SHUFFLE}"));
    assert_eq!(twice.position().fullmove_number(), 10);
    assert!(twice.position().must_move_king(Color::White));
    assert_ne!(twice.position().key(), once.position().key());
    assert_eq!(twice.repetitions(), 0);
    assert_eq!(twice.outcome(), None);
}

#[test]
fn a_different_rule_6_ban_is_a_different_position() {
    let start = fen(SHUFFLE_BOARD, "w - - 0 1");
    let knights = game(start, "b1c3 b10c8 c3b1 c8b10");
    let rooks = game(start, "b1c3 b10c8 c3b1 c8b10 a1a2 a10a9 a2a1 a9a10");
    let board_of = |p: &Position| p.fen().split(' ').next().unwrap().to_string();
    assert_eq!(board_of(knights.position()), board_of(&start));
    assert_eq!(board_of(rooks.position()), board_of(&start));
    assert_eq!(
        knights.position().banned_kind(Color::White),
        Some(Kind::Knight)
    );
    assert_eq!(rooks.position().banned_kind(Color::White), Some(Kind::Rook));
    let keys = [
        start.key(),
        knights.position().key(),
        rooks.position().key(),
    ];
    assert_ne!(keys[0], keys[1]);
    assert_ne!(keys[0], keys[2]);
    assert_ne!(keys[1], keys[2]);
    assert_eq!(knights.repetitions(), 0);
    assert_eq!(rooks.repetitions(), 0);

    // A run of one and no run are the same; a run of two is not.
    let plain = start_fen(&format!("{OPEN_KINGS} w KQkq - 0 3"));
    let one = start_fen(&format!("{OPEN_KINGS} w KQkq - 0 3 - N1n1"));
    let two = start_fen(&format!("{OPEN_KINGS} w KQkq - 0 3 - N2"));
    assert_eq!(plain.key(), one.key());
    assert_ne!(plain.key(), two.key());
}

#[test]
fn only_a_legal_en_passant_capture_makes_a_different_position() {
    // d4xe3 would expose the black king to the rook: no capture, same position.
    let pinned = play(fen("Kf1 Pe2 Rk4 ka4 pd4", "w - - 0 1"), "e2e4");
    let plain = fen("Kf1 Pe4 Rk4 ka4 pd4", "b - - 0 1");
    assert_eq!(pinned.key(), plain.key());
    let open = play(fen("Kf1 Pe2 Rk5 ka4 pd4", "w - - 0 1"), "e2e4");
    let plain = fen("Kf1 Pe4 Rk5 ka4 pd4", "b - - 0 1");
    assert_ne!(open.key(), plain.key());
}

#[test]
fn fifty_move_rule_after_100_plies() {
    let pos = fen("Kf1 Rk1 kf10", "w - - 98 42");
    assert_eq!(pos.outcome(), None);
    let pos = play(pos, "k1k2");
    assert_eq!(pos.halfmove_clock(), 99);
    assert_eq!(pos.outcome(), None);
    let pos = play(pos, "f10e10");
    assert_eq!(pos.halfmove_clock(), 100);
    assert_eq!(pos.outcome(), Some(Outcome::draw(Reason::FiftyMove)));
    // A pawn move or capture resets the clock.
    let pos = fen("Kf1 Pa2 kf10", "w - - 99 42");
    assert_eq!(play(pos, "a2a3").halfmove_clock(), 0);
    let pos = fen("Kf1 Rk1 kf10 nk9", "w - - 99 42");
    let pos = play(pos, "k1k9");
    assert_eq!(pos.halfmove_clock(), 0);
    assert_eq!(pos.outcome(), None);
}

#[test]
fn checkmate_on_the_hundredth_ply_beats_the_fifty_move_rule() {
    let g = game(fen("Ka8 Rk1 ka10", "w - - 99 42"), "k1k10");
    assert_eq!(g.position().halfmove_clock(), 100);
    assert_eq!(
        g.outcome(),
        Some(Outcome::win(Color::White, Reason::Checkmate))
    );
}

#[test]
fn only_bare_kings_are_a_dead_position() {
    let bare = fen("Kf1 kf10", "w - - 0 30");
    assert_eq!(bare.outcome(), Some(Outcome::draw(Reason::DeadPosition)));
    for extra in ["Nb1", "Bb1", "nb10", "bb10", "Nb1 nb10"] {
        let pos = fen(&format!("Kf1 kf10 {extra}"), "w - - 0 30");
        assert_eq!(pos.outcome(), None, "K+{extra} vs K is not dead");
    }
    // Reached by capturing the last piece.
    let g = game(fen("Kf1 kf10 ne2", "w - - 0 30"), "f1e2");
    assert_eq!(g.outcome(), Some(Outcome::draw(Reason::DeadPosition)));
}

#[test]
fn base_rules_ignore_rules_5_and_6() {
    let quota = "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 10";
    let base = Position::from_fen_with_rules(quota, Rules::Base).unwrap();
    assert!(!base.must_move_king(Color::White));
    assert_eq!(base.count_legal_moves(), 38);
    assert_eq!(base.outcome(), None);

    let base = Position::from_fen_with_rules(START_FEN, Rules::Base).unwrap();
    let base = play(base, "b1a3 b10a8 h1g3 h10g8");
    assert_eq!(base.banned_kind(Color::White), None);
    assert_eq!(base.run(Color::White), Run::default());
    assert!(is_legal(&base, "c1b3"));
    let pos = play(base, "c1b3 c10b8");
    assert!(is_legal(&pos, "i1k3"));
}
