use std::collections::HashSet;

use engine::{control_period, Color, EvalRequest, Kind, Move, Piece, Position, Rules, Square};
use models::encoding::{
    attack, encode, feature, hanging, mirror_files, plane_names, rule, EncoderConfig, Side,
    ENCODING_VERSION, PIECE_PLANES,
};
use models::policy::{mirror_index, move_index};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const START: &str = engine::START_FEN;
const PAWN_TO_QUEEN: [Kind; 5] = [
    Kind::Pawn,
    Kind::Knight,
    Kind::Bishop,
    Kind::Rook,
    Kind::Queen,
];

/// Every plane, the attack and hanging planes included, so that the flips
/// and mirrors below check them too.
fn config() -> EncoderConfig {
    EncoderConfig {
        attacks: true,
        hanging: true,
        ..EncoderConfig::default()
    }
}

fn encode_with(config: &EncoderConfig, history: &[Position], repetitions: u8) -> Vec<f32> {
    let request = EvalRequest {
        repetitions,
        ..EvalRequest::new(history, &[])
    };
    let mut out = vec![f32::NAN; config.input_len()];
    encode(config, &request, &mut out);
    out
}

fn encode_one(pos: &Position) -> Vec<f32> {
    encode_with(&config(), &[*pos], 0)
}

fn plane(out: &[f32], index: usize) -> &[f32] {
    &out[index * 100..(index + 1) * 100]
}

/// The value of a plane that is the same on every square.
fn constant(out: &[f32], index: usize) -> f32 {
    let p = plane(out, index);
    assert!(
        p.iter().all(|&v| v == p[0]),
        "plane {index} is not constant"
    );
    p[0]
}

fn rule_value(pos: &Position, side: Side, offset: usize) -> f32 {
    constant(&encode_one(pos), config().rule_plane(side, offset))
}

/// The squares set in a plane, as board squares of the side to move's frame.
fn marked(out: &[f32], index: usize) -> Vec<String> {
    plane(out, index)
        .iter()
        .enumerate()
        .filter(|(_, &v)| v == 1.0)
        .map(|(i, _)| Square::new(i as u8).to_string())
        .collect()
}

fn play(pos: &Position, moves: &str) -> Vec<Position> {
    let mut out = vec![*pos];
    for text in moves.split_whitespace() {
        let next = out
            .last()
            .unwrap()
            .play(parse(out.last().unwrap(), text))
            .unwrap();
        out.push(next);
    }
    out
}

fn parse(pos: &Position, text: &str) -> Move {
    pos.parse_move(text).unwrap()
}

fn start() -> Position {
    Position::start()
}

/// The value of the constant plane `index` in each position of a line of
/// `moves` from the start.
fn constant_along(index: usize, moves: &str) -> Vec<f32> {
    play(&start(), moves)
        .iter()
        .map(|p| constant(&encode_one(p), index))
        .collect()
}

/// A plain square-by-square encoder written from the plane documentation.
fn reference(config: &EncoderConfig, history: &[Position], repetitions: u8) -> Vec<f32> {
    let pos = history.last().unwrap();
    let us = pos.side_to_move();
    let board_square = |frame: usize| {
        let sq = Square::new(frame as u8);
        if us == Color::Black {
            sq.flip_rank()
        } else {
            sq
        }
    };
    let mut planes: Vec<[f32; 100]> = Vec::new();
    for age in 0..config.history {
        for color in [us, !us] {
            for kind in Kind::ALL {
                let mut p = [0.0; 100];
                if let Some(past) = history.len().checked_sub(age + 1).map(|i| &history[i]) {
                    for (i, v) in p.iter_mut().enumerate() {
                        if past.piece_at(board_square(i)) == Some(Piece::new(color, kind)) {
                            *v = 1.0;
                        }
                    }
                }
                planes.push(p);
            }
        }
    }
    let full = |v: f32| [v; 100];
    let flag = |b: bool| full(if b { 1.0 } else { 0.0 });
    planes.push(flag(us == Color::Black));
    let rights = pos.castling_rights();
    for color in [us, !us] {
        let shift = if color == Color::White { 0 } else { 2 };
        planes.push(flag(rights.bits() >> shift & 1 != 0));
        planes.push(flag(rights.bits() >> shift & 2 != 0));
    }
    let ep = pos.legal_en_passant_targets();
    let mut p = [0.0; 100];
    for (i, v) in p.iter_mut().enumerate() {
        if ep.has(board_square(i)) {
            *v = 1.0;
        }
    }
    planes.push(p);
    planes.push(flag(repetitions >= 1));
    planes.push(flag(repetitions >= 2));
    planes.push(full(f32::from(pos.halfmove_clock().min(100)) / 100.0));
    let full_rules = pos.rules() == Rules::Full;
    for color in [us, !us] {
        let run = pos.run(color);
        for kind in PAWN_TO_QUEEN {
            planes.push(flag(full_rules && run.kind == Some(kind)));
        }
        planes.push(full(if full_rules {
            f32::from(run.length) / 2.0
        } else {
            0.0
        }));
        for kind in PAWN_TO_QUEEN {
            planes.push(flag(full_rules && pos.banned_kind(color) == Some(kind)));
        }
        let n = pos.next_move_number(color);
        let period = control_period(color, n).filter(|_| full_rules);
        planes.push(flag(period.is_some()));
        planes.push(full(period.map_or(0.0, |p| (p.last - n + 1) as f32 / 10.0)));
        planes.push(flag(full_rules && pos.king_moved_in_period(color)));
        planes.push(flag(pos.must_move_king(color)));
    }
    if config.attacks {
        for color in [us, !us] {
            for least in [1, 2] {
                let mut p = [0.0; 100];
                for (i, v) in p.iter_mut().enumerate() {
                    let attackers = pos.attackers(board_square(i), color, pos.occupied());
                    if attackers.count() >= least {
                        *v = 1.0;
                    }
                }
                planes.push(p);
            }
        }
    }
    if config.hanging {
        for color in [us, !us] {
            let hanging = pos.hanging(color, &pos.coverage(color), &pos.coverage(!color));
            planes.push(std::array::from_fn(|i| {
                if hanging.has(board_square(i)) {
                    1.0
                } else {
                    0.0
                }
            }));
        }
    }
    planes.concat()
}

/// Games of random legal moves from the start; each game's positions, oldest first.
fn random_games(seed: u64, games: usize, plies: usize) -> Vec<Vec<Position>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..games)
        .map(|_| {
            let mut line = vec![start()];
            for _ in 0..plies {
                let moves = line.last().unwrap().legal_moves();
                if moves.is_empty() {
                    break;
                }
                let next = line
                    .last()
                    .unwrap()
                    .after(moves[rng.random_range(0..moves.len())]);
                line.push(next);
            }
            line
        })
        .collect()
}

fn swap_case(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_uppercase() {
                c.to_ascii_lowercase()
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

/// The FEN with colours swapped and ranks flipped; `fullmove` replaces the move number.
fn mirror_fen(fen: &str, fullmove: Option<u16>) -> String {
    let f: Vec<&str> = fen.split(' ').collect();
    let board: Vec<String> = f[0].split('/').rev().map(swap_case).collect();
    let side = if f[1] == "w" { "b" } else { "w" };
    let ordered = |field: &str, order: &str| {
        let mut chars: Vec<char> = swap_case(field).chars().collect();
        chars.sort_by_key(|&c| order.find(c));
        chars.into_iter().collect::<String>()
    };
    let castling = if f[2] == "-" {
        "-".to_string()
    } else {
        ordered(f[2], "KQkq")
    };
    let mut ep = String::new();
    let mut rest = f[3];
    while let Some((sq, used)) = Square::parse_prefix(rest) {
        ep.push_str(&sq.flip_rank().to_string());
        rest = &rest[used..];
    }
    if ep.is_empty() {
        ep.push('-');
    }
    let number = fullmove.map_or(f[5].to_string(), |n| n.to_string());
    let mut out = format!(
        "{} {side} {castling} {ep} {} {number}",
        board.join("/"),
        f[4]
    );
    if f.len() == 8 {
        let kings = if f[6] == "-" {
            "-".to_string()
        } else {
            ordered(f[6], "Kk")
        };
        let mut runs: Vec<String> = f[7]
            .as_bytes()
            .chunks(2)
            .map(|pair| swap_case(std::str::from_utf8(pair).unwrap()))
            .collect();
        runs.sort_by_key(|run| run.as_bytes()[0].is_ascii_lowercase());
        out.push_str(&format!(" {kings} {}", runs.concat()));
    }
    out
}

fn mirror(pos: &Position, fullmove: Option<u16>) -> Position {
    let fen = mirror_fen(&pos.fen(), fullmove);
    Position::from_fen_with_rules(&fen, pos.rules()).unwrap_or_else(|e| panic!("{fen}: {e}"))
}

#[test]
fn layout() {
    let config = config();
    assert_eq!(config.history, 4);
    assert_eq!(config.planes(), 4 * PIECE_PLANES + 39 + 4 + 2);
    assert_eq!(config.input_len(), 9300);
    assert_eq!(ENCODING_VERSION, 1);
    let names = plane_names(&config);
    assert_eq!(names.len(), config.planes());
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len());
    assert_eq!(
        names[config.piece_plane(3, Side::Opponent, Kind::King)],
        "h3 opp K"
    );
    assert_eq!(
        names[config.feature_plane(feature::EN_PASSANT)],
        "en passant"
    );
    assert_eq!(
        names[config.feature_plane(feature::HALFMOVE)],
        "halfmove clock"
    );
    assert_eq!(
        names[config.rule_plane(Side::Own, rule::BANNED_KIND + Kind::Knight.index())],
        "own banned N"
    );
    assert_eq!(
        names[config.rule_plane(Side::Opponent, rule::MUST_MOVE_KING)],
        "opp must move king"
    );
    assert_eq!(
        names[config.attack_plane(attack::OWN + 1)],
        "own attacks twice"
    );
    assert_eq!(
        names[config.hanging_plane(hanging::OWN)],
        "own pieces hanging"
    );
    assert_eq!(names.last().unwrap(), "opp pieces hanging");
    let no_hanging = EncoderConfig {
        hanging: false,
        ..config
    };
    assert_eq!(no_hanging.planes(), config.planes() - hanging::COUNT);
    assert_eq!(
        plane_names(&no_hanging).last().unwrap(),
        "opp attacks twice"
    );
    let hanging_only = EncoderConfig {
        attacks: false,
        ..config
    };
    assert_eq!(hanging_only.hanging_plane(0), config.attack_plane(0));
    let without = EncoderConfig {
        hanging: false,
        ..hanging_only
    };
    assert_eq!(
        without.planes(),
        config.planes() - attack::COUNT - hanging::COUNT
    );
    assert_eq!(plane_names(&without).last().unwrap(), "opp must move king");
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(
        serde_json::from_str::<EncoderConfig>(&json).unwrap(),
        config
    );
}

#[test]
fn matches_the_reference_on_random_games() {
    let mut rng = SmallRng::seed_from_u64(5);
    for (history, rules, attacks, hanging) in [
        (4, Rules::Full, false, false),
        (2, Rules::Full, true, true),
        (3, Rules::Base, true, false),
        (1, Rules::Full, false, true),
    ] {
        let config = EncoderConfig {
            history,
            attacks,
            hanging,
            ply_plane: 0,
        };
        for game in random_games(history as u64, 12, 120) {
            let game: Vec<Position> = game.iter().map(|p| p.with_rules(rules)).collect();
            for end in 1..=game.len() {
                let window = &game[end.saturating_sub(6)..end];
                let repetitions = rng.random_range(0..3);
                let out = encode_with(&config, window, repetitions);
                assert!(out.iter().all(|v| (0.0..=1.0).contains(v)));
                let expected = reference(&config, window, repetitions);
                if out != expected {
                    let names = plane_names(&config);
                    let bad = (0..config.planes())
                        .find(|&p| plane(&out, p) != plane(&expected, p))
                        .unwrap();
                    panic!("plane {} differs at {:?}", names[bad], window.last());
                }
            }
        }
    }
}

/// The ply plane counts the plies from a game's start (fullmove 1) against
/// its cap, whoever is to move, and is read as one number per position.
#[test]
fn the_ply_plane_counts_plies_against_the_cap() {
    let config = EncoderConfig {
        ply_plane: 100,
        ..config()
    };
    assert_eq!(config.planes(), self::config().planes() + 1);
    let plane_index = config.ply_plane_index().unwrap();
    assert_eq!(plane_names(&config)[plane_index], "plies played");
    assert!(config.whole_board_planes().contains(&plane_index));
    assert_eq!(self::config().ply_plane_index(), None);
    let share = |fen: &str| {
        let pos = Position::from_fen(fen).unwrap();
        let out = encode_with(&config, &[pos], 0);
        let values = plane(&out, plane_index);
        assert!(values.iter().all(|&v| v == values[0]), "{fen}");
        values[0]
    };
    assert_eq!(share(START), 0.0);
    let after_one = Position::start().after(Position::start().legal_moves()[0]);
    assert_eq!(share(&after_one.fen()), 0.01);
    assert_eq!(share("4k5/10/10/10/10/10/10/10/10/4K5 w - - 0 26"), 0.5);
    assert_eq!(share("4k5/10/10/10/10/10/10/10/10/4K5 b - - 0 50"), 0.99);
    assert_eq!(share("4k5/10/10/10/10/10/10/10/10/4K5 w - - 0 90"), 1.0);
    // The rest of the encoding is the same as without the plane.
    let pos = Position::from_fen("4k5/10/10/10/10/10/10/10/10/4K5 b - - 0 50").unwrap();
    let with = encode_with(&config, &[pos], 0);
    let without = encode_with(&self::config(), &[pos], 0);
    assert_eq!(with[..without.len()], without[..]);
}

/// The planes the net's input layer reads as one number per position hold
/// one value over the whole board in every encoding, and they are every
/// feature plane but the en passant squares.
#[test]
fn whole_board_planes_hold_one_value() {
    let config = config();
    let planes = config.whole_board_planes();
    assert_eq!(planes.len(), feature::COUNT - 1);
    assert!(!planes.contains(&config.feature_plane(feature::EN_PASSANT)));
    let names = plane_names(&config);
    let mut seen_nonzero = HashSet::new();
    for game in random_games(9, 8, 160) {
        for end in 1..=game.len() {
            let window = &game[end.saturating_sub(2)..end];
            let out = encode_with(&config, window, (end % 3) as u8);
            for &p in &planes {
                let values = plane(&out, p);
                assert!(values.iter().all(|&v| v == values[0]), "{}", names[p]);
                if values[0] != 0.0 {
                    seen_nonzero.insert(p);
                }
            }
        }
    }
    // The games reach most of those states, so the check is not of zeros.
    assert!(
        seen_nonzero.len() * 4 >= planes.len() * 3,
        "{seen_nonzero:?}"
    );
}

#[test]
fn history_planes_hold_previous_positions() {
    let config = config();
    let line = play(&start(), "e2e5 a9a7");
    let out = encode_with(&config, &line, 0);
    // White to move: the frame is the board, e5 now and e2 one and two plies back.
    let own_pawns = |age| marked(&out, config.piece_plane(age, Side::Own, Kind::Pawn));
    let opp_pawns = |age| marked(&out, config.piece_plane(age, Side::Opponent, Kind::Pawn));
    assert!(own_pawns(0).contains(&"e5".to_string()));
    assert!(!own_pawns(0).contains(&"e2".to_string()));
    assert!(own_pawns(1).contains(&"e5".to_string()));
    assert!(own_pawns(2).contains(&"e2".to_string()));
    assert!(opp_pawns(0).contains(&"a7".to_string()));
    assert!(opp_pawns(1).contains(&"a9".to_string()));
    assert!(opp_pawns(2).contains(&"a9".to_string()));
    assert!(plane(&out, config.piece_plane(3, Side::Own, Kind::King))
        .iter()
        .all(|&v| v == 0.0));
    for age in 0..3 {
        assert_eq!(
            marked(&out, config.piece_plane(age, Side::Own, Kind::King)),
            ["f1"]
        );
        assert_eq!(
            marked(&out, config.piece_plane(age, Side::Opponent, Kind::Queen)),
            ["e10"]
        );
    }
    // Black to move: own is Black, in Black's frame (f10 -> f1), for every age.
    let out = encode_with(&config, &line[..2], 0);
    assert_eq!(
        marked(&out, config.piece_plane(0, Side::Own, Kind::King)),
        ["f1"]
    );
    assert_eq!(
        marked(&out, config.piece_plane(1, Side::Opponent, Kind::King)),
        ["f10"]
    );
    assert!(
        marked(&out, config.piece_plane(0, Side::Opponent, Kind::Pawn)).contains(&"e6".to_string())
    );
    assert!(
        marked(&out, config.piece_plane(1, Side::Opponent, Kind::Pawn)).contains(&"e9".to_string())
    );
}

#[test]
fn attack_planes_mark_what_each_side_attacks() {
    // The knight on d7 attacks the queen on e5; king and queen both cover
    // e1 and e2, king and knight e9.
    let pos = Position::from_fen("5k4/10/10/3n6/10/4Q5/10/10/10/5K4 w - - 0 1").unwrap();
    let out = encode_one(&pos);
    let plane = |offset| config().attack_plane(offset);
    let own = marked(&out, plane(attack::OWN));
    for sq in ["e5", "g1", "i1", "a1", "e10", "k5"] {
        assert_eq!(own.contains(&sq.to_string()), sq != "e5", "{sq}");
    }
    assert_eq!(marked(&out, plane(attack::OWN + 1)), ["e1", "e2"]);
    let theirs = marked(&out, plane(attack::OPPONENT));
    assert!(theirs.contains(&"e5".to_string()), "{theirs:?}");
    assert_eq!(theirs.len(), 5 + 8 - 1);
    assert_eq!(marked(&out, plane(attack::OPPONENT + 1)), ["e9"]);
}

#[test]
fn hanging_planes_mark_the_pieces_a_first_capture_wins() {
    // The rook on c4 hangs to the pawn on d5 though the pawn on b3 guards
    // it; the bishop on e7 hangs to the rook on e1, unguarded. The knight
    // on g5, guarded and attacked by a bishop, does not hang, nor do the
    // unattacked pawns, nor the kings.
    let fen = "5k4/10/10/4b5/10/3p2N3/2R4P2/1P8/10/4RK4 w - - 0 1";
    let white = Position::from_fen(fen).unwrap();
    let out = encode_one(&white);
    let plane = |offset| config().hanging_plane(offset);
    assert_eq!(marked(&out, plane(hanging::OWN)), ["c4"]);
    assert_eq!(marked(&out, plane(hanging::OPPONENT)), ["e7"]);
    // With Black to move the planes swap, in Black's frame (ranks flipped).
    let black = Position::from_fen(&fen.replace(" w ", " b ")).unwrap();
    let out = encode_one(&black);
    assert_eq!(marked(&out, plane(hanging::OWN)), ["e4"]);
    assert_eq!(marked(&out, plane(hanging::OPPONENT)), ["c7"]);
}

#[test]
fn side_to_move_plane() {
    let plane = config().feature_plane(feature::SIDE_TO_MOVE);
    assert_eq!(constant_along(plane, "e2e3 e9e8"), [0.0, 1.0, 0.0]);
}

#[test]
fn castling_planes_follow_the_rights() {
    let pos =
        Position::from_fen("r4k3r/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/R4K3R w KQkq - 0 1")
            .unwrap();
    let rights = |pos: &Position| {
        let out = encode_one(pos);
        (0..4)
            .map(|i| constant(&out, config().feature_plane(feature::CASTLING + i)))
            .collect::<Vec<_>>()
    };
    let line = play(&pos, "f1i1 k10i10 a2a3");
    // Own short, own long, opponent short, opponent long.
    assert_eq!(rights(&line[0]), [1.0; 4]);
    assert_eq!(rights(&line[1]), [1.0, 1.0, 0.0, 0.0]);
    assert_eq!(rights(&line[2]), [0.0, 0.0, 0.0, 1.0]);
    assert_eq!(rights(&line[3]), [0.0, 1.0, 0.0, 0.0]);
}

#[test]
fn en_passant_plane_marks_every_passed_square() {
    let pos =
        Position::from_fen("r4k3r/pp2pppppp/10/10/10/3p6/3p6/10/PPPPPPPPPP/R4K3R w KQkq - 0 1")
            .unwrap();
    let ep = config().feature_plane(feature::EN_PASSANT);
    let line = play(&pos, "e2e5 a9a8");
    assert!(marked(&encode_one(&line[0]), ep).is_empty());
    // e3 and e4 seen by Black are e8 and e7.
    assert_eq!(marked(&encode_one(&line[1]), ep), ["e7", "e8"]);
    assert!(marked(&encode_one(&line[2]), ep).is_empty());
    // A step past no enemy pawn gives no target.
    let line = play(&pos, "a2a5");
    assert!(marked(&encode_one(&line[1]), ep).is_empty());
}

#[test]
fn repetition_planes() {
    let config = config();
    let pos = start();
    for (repetitions, expected) in [(0, [0.0, 0.0]), (1, [1.0, 0.0]), (2, [1.0, 1.0])] {
        let out = encode_with(&config, &[pos], repetitions);
        let got = [0, 1].map(|i| constant(&out, config.feature_plane(feature::REPETITIONS + i)));
        assert_eq!(got, expected);
    }
}

#[test]
fn halfmove_plane_scales_the_clock() {
    let plane = config().feature_plane(feature::HALFMOVE);
    assert_eq!(
        constant_along(plane, "b1a3 b10a8 a3b5 e9e8"),
        [0.0, 0.01, 0.02, 0.03, 0.0]
    );
    let fen = START.replace(" 0 1", " 37 40");
    assert_eq!(
        constant(&encode_one(&Position::from_fen(&fen).unwrap()), plane),
        0.37
    );
    let fen = START.replace(" 0 1", " 150 90");
    assert_eq!(
        constant(&encode_one(&Position::from_fen(&fen).unwrap()), plane),
        1.0
    );
}

#[test]
fn rule_6_planes_follow_the_run() {
    let line = play(&start(), "f2f3 a9a8 b1a3 b10c8 h1g3 a8a7 f1f2");
    let banned_knight = rule::BANNED_KIND + Kind::Knight.index();
    let last_knight = rule::LAST_KIND + Kind::Knight.index();
    let last_pawn = rule::LAST_KIND + Kind::Pawn.index();
    // After 2. Na3, Black to move: White's run is one knight move.
    let pos = &line[3];
    assert_eq!(rule_value(pos, Side::Opponent, last_knight), 1.0);
    assert_eq!(rule_value(pos, Side::Opponent, last_pawn), 0.0);
    assert_eq!(rule_value(pos, Side::Opponent, rule::RUN_LENGTH), 0.5);
    assert_eq!(rule_value(pos, Side::Opponent, banned_knight), 0.0);
    assert_eq!(rule_value(pos, Side::Own, last_pawn), 1.0);
    // After 3. Ng3, Black to move: White may not move a knight next.
    let pos = &line[5];
    assert_eq!(rule_value(pos, Side::Opponent, rule::RUN_LENGTH), 1.0);
    assert_eq!(rule_value(pos, Side::Opponent, banned_knight), 1.0);
    assert_eq!(rule_value(pos, Side::Own, banned_knight), 0.0);
    assert_eq!(rule_value(pos, Side::Own, last_knight), 1.0);
    // White to move: the ban is its own now.
    let pos = &line[6];
    assert_eq!(rule_value(pos, Side::Own, banned_knight), 1.0);
    assert_eq!(rule_value(pos, Side::Opponent, banned_knight), 0.0);
    assert_eq!(rule_value(pos, Side::Opponent, last_pawn), 1.0);
    assert_eq!(rule_value(pos, Side::Opponent, rule::RUN_LENGTH), 0.5);
    // 4. Kf2 breaks the run.
    let pos = &line[7];
    let out = encode_one(pos);
    let config = config();
    for offset in rule::LAST_KIND..rule::IN_PERIOD {
        assert_eq!(
            constant(&out, config.rule_plane(Side::Opponent, offset)),
            0.0
        );
    }
    assert_eq!(rule_value(pos, Side::Opponent, rule::KING_MOVED), 1.0);
    assert_eq!(rule_value(pos, Side::Own, rule::KING_MOVED), 0.0);
}

/// Plays non-king moves for both sides (the first legal one) up to White's move 10.
fn no_king_moves_until_move_10() -> Vec<Position> {
    let mut line = play(&start(), "f2f3 f9f8");
    while line.last().unwrap().fullmove_number() < 10 {
        let pos = *line.last().unwrap();
        let king = pos.king(pos.side_to_move());
        let mv = pos
            .legal_moves()
            .into_iter()
            .find(|m| m.from != king)
            .unwrap();
        line.push(pos.after(mv));
    }
    line
}

#[test]
fn rule_5_planes_follow_the_period() {
    let line = no_king_moves_until_move_10();
    let at_10 = *line.last().unwrap();
    assert_eq!(at_10.side_to_move(), Color::White);
    let at_9 = line[line.len() - 3];
    assert_eq!(at_9.fullmove_number(), 9);

    let values = |pos: &Position, side| {
        [
            rule::IN_PERIOD,
            rule::PERIOD_LEFT,
            rule::KING_MOVED,
            rule::MUST_MOVE_KING,
        ]
        .map(|offset| rule_value(pos, side, offset))
    };
    assert_eq!(values(&start(), Side::Own), [1.0, 1.0, 0.0, 0.0]);
    assert_eq!(values(&at_9, Side::Own), [1.0, 0.2, 0.0, 0.0]);
    // White to move at move 10 without a king move: only king moves are legal.
    assert_eq!(values(&at_10, Side::Own), [1.0, 0.1, 0.0, 1.0]);
    // Black's next move is also its move 10.
    assert_eq!(values(&at_10, Side::Opponent), [1.0, 0.1, 0.0, 1.0]);
    // Black to move at move 9: White's next move is its 10th.
    assert_eq!(
        values(&line[line.len() - 2], Side::Opponent),
        [1.0, 0.1, 0.0, 1.0]
    );
    assert_eq!(
        values(&line[line.len() - 2], Side::Own),
        [1.0, 0.2, 0.0, 0.0]
    );

    let king_move = at_10.legal_moves()[0];
    let after = at_10.after(king_move);
    // White's next move is 11, the first of 11-15, with its quota reset.
    assert_eq!(values(&after, Side::Opponent), [1.0, 0.5, 0.0, 0.0]);
    assert_eq!(values(&after, Side::Own), [1.0, 0.1, 0.0, 1.0]);
}

#[test]
fn rule_5_planes_outside_periods() {
    // Move 17: Black is in 16-20, White's move 17 is in none.
    let fen = "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 17 k -";
    let pos = Position::from_fen(fen).unwrap();
    let values = |side| {
        [rule::IN_PERIOD, rule::PERIOD_LEFT, rule::KING_MOVED]
            .map(|offset| rule_value(&pos, side, offset))
    };
    assert_eq!(values(Side::Own), [0.0, 0.0, 0.0]);
    assert_eq!(values(Side::Opponent), [1.0, 0.4, 1.0]);
}

#[test]
fn base_rules_leave_the_rule_planes_empty() {
    let fen = "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 10 - N2p1";
    let config = config();
    let rules = config.feature_plane(feature::RULES) * 100..config.attack_plane(0) * 100;
    let full = encode_one(&Position::from_fen(fen).unwrap());
    assert!(full[rules.clone()].iter().any(|&v| v != 0.0));
    let base = encode_one(&Position::from_fen_with_rules(fen, Rules::Base).unwrap());
    assert!(base[rules.clone()].iter().all(|&v| v == 0.0));
    // The pieces, the other features and the attack planes are the same.
    assert_eq!(base[..rules.start], full[..rules.start]);
    assert_eq!(base[rules.end..], full[rules.end..]);
}

/// Planes that depend on the move number, which is not colour-symmetric
/// (White moves first and the two sides' control periods differ).
fn timing_planes(config: &EncoderConfig) -> Vec<usize> {
    let mut planes = vec![config.feature_plane(feature::SIDE_TO_MOVE)];
    for side in [Side::Own, Side::Opponent] {
        for offset in [rule::IN_PERIOD, rule::PERIOD_LEFT, rule::MUST_MOVE_KING] {
            planes.push(config.rule_plane(side, offset));
        }
    }
    planes
}

#[test]
fn black_to_move_encodes_like_the_mirrored_white_position() {
    let config = config();
    let skip = timing_planes(&config);
    let mut checked = 0;
    for rules in [Rules::Full, Rules::Base] {
        for game in random_games(17, 10, 150) {
            let game: Vec<Position> = game.iter().map(|p| p.with_rules(rules)).collect();
            for end in 4..=game.len() {
                let window = &game[end - 4..end];
                if window[3].side_to_move() != Color::Black {
                    continue;
                }
                let mirrored: Vec<Position> = window.iter().map(|p| mirror(p, None)).collect();
                let a = encode_with(&config, window, 1);
                let b = encode_with(&config, &mirrored, 1);
                for p in 0..config.planes() {
                    let base_equal = rules == Rules::Base && p != skip[0];
                    if !skip.contains(&p) || base_equal {
                        assert_eq!(plane(&a, p), plane(&b, p), "plane {p} of {:?}", window[3]);
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 1000);
}

/// The FEN mirrored left to right (a1 <-> k1); only for positions without
/// castling rights, which have no mirror image. A rank's tokens (a piece,
/// or a run of empty squares) in reverse order are its mirror image.
fn flip_files_fen(fen: &str) -> String {
    let mut f: Vec<String> = fen.split(' ').map(str::to_string).collect();
    assert_eq!(f[2], "-", "{fen}");
    let ranks: Vec<String> = f[0]
        .split('/')
        .map(|rank| {
            let mut tokens: Vec<String> = Vec::new();
            for c in rank.chars() {
                match tokens.last_mut() {
                    Some(run)
                        if c.is_ascii_digit() && run.starts_with(|d: char| d.is_ascii_digit()) =>
                    {
                        run.push(c)
                    }
                    _ => tokens.push(c.to_string()),
                }
            }
            tokens.reverse();
            tokens.concat()
        })
        .collect();
    f[0] = ranks.join("/");
    let mut ep = String::new();
    let mut rest = f[3].as_str();
    while let Some((sq, used)) = Square::parse_prefix(rest) {
        ep.push_str(&sq.flip_file().to_string());
        rest = &rest[used..];
    }
    if !ep.is_empty() {
        f[3] = ep;
    }
    f.join(" ")
}

#[test]
fn files_mirror_like_the_mirrored_position() {
    let config = config();
    let mut checked = 0;
    for game in random_games(23, 10, 150) {
        for end in 4..=game.len() {
            let window = &game[end - 4..end];
            let pos = window[3];
            if !pos.castling_rights().is_empty() {
                continue;
            }
            // The history's positions may still have had castling rights:
            // only their pieces are encoded, so mirror those by hand.
            let twins: Vec<Position> = window
                .iter()
                .map(|p| {
                    let fen = p.fen();
                    let mut f: Vec<&str> = fen.split(' ').collect();
                    f[2] = "-";
                    let fen = flip_files_fen(&f.join(" "));
                    Position::from_fen(&fen).unwrap_or_else(|e| panic!("{fen}: {e}"))
                })
                .collect();
            let mut a = encode_with(&config, window, 1);
            mirror_files(&mut a);
            assert_eq!(a, encode_with(&config, &twins, 1), "{}", pos.fen());

            // The mirrored position's legal moves are the mirrored moves, at
            // the mirrored policy indices.
            let twin = twins[3];
            let side = pos.side_to_move();
            let mut ours: Vec<usize> = pos
                .legal_moves()
                .iter()
                .map(|&mv| mirror_index(move_index(side, mv).unwrap()))
                .collect();
            let mut theirs: Vec<usize> = twin
                .legal_moves()
                .iter()
                .map(|&mv| move_index(side, mv).unwrap())
                .collect();
            ours.sort_unstable();
            theirs.sort_unstable();
            assert_eq!(ours, theirs, "{}", pos.fen());
            checked += 1;
        }
    }
    assert!(checked > 500, "{checked}");
}

#[test]
fn mirror_with_matching_periods_is_identical() {
    // Black's move 17 (16-20, four left) against White's move 12 (11-15, four left);
    // the opponent is outside its periods in both.
    let fen =
        "r1nbqkbnnr/pppp1ppppp/2n7/4p5/10/10/4P5/5N4/PPPP1PPPPP/RNNBQKB2R b KQq - 3 17 k N2p1";
    let pos = Position::from_fen(fen).unwrap();
    let twin = mirror(&pos, Some(12));
    assert_eq!(twin.side_to_move(), Color::White);
    assert_eq!(twin.banned_kind(Color::Black), Some(Kind::Knight));
    let config = config();
    let a = encode_one(&pos);
    let b = encode_one(&twin);
    for p in 0..config.planes() {
        if p != config.feature_plane(feature::SIDE_TO_MOVE) {
            assert_eq!(plane(&a, p), plane(&b, p), "{}", plane_names(&config)[p]);
        }
    }
    assert_eq!(rule_value(&pos, Side::Own, rule::PERIOD_LEFT), 0.4);
    assert_eq!(rule_value(&pos, Side::Opponent, rule::IN_PERIOD), 0.0);
}

#[test]
#[should_panic(expected = "encoding buffer size")]
fn wrong_buffer_size_panics() {
    let history = [start()];
    let request = EvalRequest::new(&history, &[]);
    encode(&config(), &request, &mut [0.0; 100]);
}
