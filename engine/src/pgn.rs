//! PGN for Chess-mix games: the Seven Tag Roster, `[Variant "Chess-mix"]`,
//! `SetUp`/`FEN` for other starts and SAN movetext, with each move's
//! evaluation as a `[%eval]` comment when one is known (the convention of
//! lichess: White's view, pawns or `#N` for a mate). The reader keeps those
//! evaluations, skips other comments, variations, NAGs and move numbers,
//! and reads several games.

use crate::error::PgnError;
use crate::game::{Game, Outcome, Reason};
use crate::position::{Position, START_FEN};
use crate::search::Score;
use crate::types::Color;

/// A game read from PGN with its tags in file order.
#[derive(Clone, Debug)]
pub struct PgnGame {
    pub tags: Vec<(String, String)>,
    pub game: Game,
    /// One per move: its `[%eval]`, as the score of the position it was
    /// played from for the side that played it.
    pub evals: Vec<Option<Score>>,
}

impl PgnGame {
    /// The value of the last tag called `name` (case-insensitive).
    pub fn tag(&self, name: &str) -> Option<&str> {
        find_tag(&self.tags, name)
    }
}

const VARIANT: &str = "Chess-mix";
/// Tags the writer derives from the game; the caller's are ignored.
const DERIVED: [&str; 4] = ["Result", "Variant", "SetUp", "FEN"];
const ROSTER: [(&str, &str); 6] = [
    ("Event", "?"),
    ("Site", "?"),
    ("Date", "????.??.??"),
    ("Round", "?"),
    ("White", "?"),
    ("Black", "?"),
];
const LINE_WIDTH: usize = 80;

/// Writes `game` (whose moves must be legal) as PGN. `tags` override the
/// roster's defaults and add other tags; `Result`, `Variant`, `SetUp` and
/// `FEN` come from the game. A finished game gets a `Termination` tag with
/// the outcome's reason unless `tags` has one.
pub fn write_pgn(game: &Game, tags: &[(&str, String)]) -> String {
    write_annotated_pgn(game, tags, &[])
}

/// [`write_pgn`] with `evals[i]`, the score of move `i` for the side that
/// played it (as [`PgnGame::evals`]), written after the move as `[%eval]`.
pub fn write_annotated_pgn(
    game: &Game,
    tags: &[(&str, String)],
    evals: &[Option<Score>],
) -> String {
    let outcome = game.outcome();
    let result = outcome.map_or("*", |o| o.result());
    let given = |name: &str| {
        tags.iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };

    let mut out = String::new();
    for (name, default) in ROSTER {
        push_tag(&mut out, name, given(name).unwrap_or(default));
    }
    push_tag(&mut out, "Result", result);
    push_tag(&mut out, "Variant", VARIANT);
    let start = game.start();
    let fen = start.fen();
    if fen != START_FEN {
        push_tag(&mut out, "SetUp", "1");
        push_tag(&mut out, "FEN", &fen);
    }
    if let Some(outcome) = outcome {
        if given("Termination").is_none() {
            push_tag(&mut out, "Termination", outcome.reason.as_str());
        }
    }
    for (i, (name, value)) in tags.iter().enumerate() {
        let handled = ROSTER.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
            || DERIVED.iter().any(|n| n.eq_ignore_ascii_case(name));
        let repeated = tags[i + 1..]
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name));
        let valid =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !handled && !repeated && valid {
            push_tag(&mut out, name, value);
        }
    }
    out.push('\n');

    let mut tokens = Vec::with_capacity(game.moves().len() * 3 / 2 + 1);
    let mut pos = *start;
    for (i, &mv) in game.moves().iter().enumerate() {
        let number = pos.fullmove_number();
        if pos.side_to_move() == Color::White {
            tokens.push(format!("{number}."));
        } else if i == 0 {
            tokens.push(format!("{number}..."));
        }
        tokens.push(pos.san(mv));
        if let Some(&Some(score)) = evals.get(i) {
            let white = swap_view(score, pos.side_to_move());
            tokens.push(format!("{{[%eval {}]}}", eval_text(white)));
        }
        pos = pos.after(mv);
    }
    tokens.push(result.to_string());

    let mut line_len = 0;
    for token in tokens {
        if line_len > 0 && line_len + 1 + token.len() >= LINE_WIDTH {
            out.push('\n');
            line_len = 0;
        } else if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(&token);
        line_len += token.len();
    }
    out.push('\n');
    out
}

/// A score between White's view and `mover`'s, either way (PGN's
/// `[%eval]` is White's; [`PgnGame::evals`] are the mover's).
fn swap_view(score: Score, mover: Color) -> Score {
    match mover {
        Color::White => score,
        Color::Black => score.flipped(),
    }
}

/// `0.35`, `-1.20`, `#3` (White mates in 3) or `#-2`.
fn eval_text(score: Score) -> String {
    match score {
        Score::Centipawns(cp) => format!("{:.2}", cp as f64 / 100.0),
        Score::Mate(moves) => format!("#{moves}"),
    }
}

/// The `[%eval]` of a comment's text, if it has one. `None` inside is an
/// eval that does not read.
fn read_eval(comment: &str) -> Option<Option<Score>> {
    let (_, rest) = comment.split_once("[%eval")?;
    let Some((value, _)) = rest.split_once(']') else {
        return Some(None);
    };
    // lichess may add the search depth: `[%eval 0.35,22]`.
    let value = value.split(',').next().unwrap_or_default().trim();
    let score = match value.strip_prefix('#') {
        Some(moves) => moves.parse().ok().map(Score::Mate),
        None => value
            .parse::<f64>()
            .ok()
            .filter(|pawns| pawns.abs() < 1e6)
            .map(|pawns| Score::Centipawns((pawns * 100.0).round() as i32)),
    };
    Some(score)
}

/// `[Name "value"]` with `\` and `"` escaped and line breaks flattened.
fn push_tag(out: &mut String, name: &str, value: &str) {
    out.push('[');
    out.push_str(name);
    out.push_str(" \"");
    for c in value.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push_str("\"]\n");
}

fn find_tag<'a>(tags: &'a [(String, String)], name: &str) -> Option<&'a str> {
    tags.iter()
        .rev()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Reads the first game of `text`.
pub fn read_pgn(text: &str) -> Result<PgnGame, PgnError> {
    read_game(&mut Lexer::new(text))?.ok_or(PgnError::Empty)
}

/// Reads every game of `text` (none for a text without games).
pub fn read_pgns(text: &str) -> Result<Vec<PgnGame>, PgnError> {
    let mut lexer = Lexer::new(text);
    let mut games = Vec::new();
    while let Some(game) = read_game(&mut lexer)? {
        games.push(game);
    }
    Ok(games)
}

/// Reads one game: tags, then movetext up to a result token, the next tag
/// section or the end. A result that the final position does not decide
/// (resignation, a length cap) becomes an adjudication.
fn read_game(lexer: &mut Lexer) -> Result<Option<PgnGame>, PgnError> {
    let mut tags: Vec<(String, String)> = Vec::new();
    let mut game: Option<Game> = None;
    let mut evals = Vec::new();
    let mut result = None;
    while let Some((line, token)) = lexer.next()? {
        match token {
            Token::Tag(name, value) => {
                if game.is_some() {
                    lexer.pending = Some((line, Token::Tag(name, value)));
                    break;
                }
                tags.push((name, value));
            }
            Token::Word(word) => {
                if matches!(word, "1-0" | "0-1" | "1/2-1/2" | "*") {
                    result = Some(word);
                    break;
                }
                let text = strip_move_number(word);
                if text.is_empty() || text == "e.p." || text.bytes().all(|b| b == b'!' || b == b'?')
                {
                    continue;
                }
                let game = match &mut game {
                    Some(game) => game,
                    None => game.insert(Game::new(start_position(&tags)?)),
                };
                let mv = game
                    .position()
                    .parse_san(text)
                    .map_err(|source| PgnError::Move {
                        ply: game.moves().len() + 1,
                        source,
                    })?;
                game.play_unchecked(mv);
                evals.push(None);
            }
            Token::Comment(text) => {
                let Some(read) = read_eval(text) else {
                    continue;
                };
                let score = read.ok_or_else(|| PgnError::Eval {
                    line,
                    text: text.trim().to_string(),
                })?;
                // An eval before the first move belongs to no move.
                if let (Some(game), Some(last)) = (&game, evals.last_mut()) {
                    *last = Some(swap_view(score, !game.position().side_to_move()));
                }
            }
        }
    }
    if tags.is_empty() && game.is_none() && result.is_none() {
        return Ok(None);
    }
    let mut game = match game {
        Some(game) => game,
        None => Game::new(start_position(&tags)?),
    };
    let winner = match result.or_else(|| find_tag(&tags, "Result")) {
        Some("1-0") => Some(Some(Color::White)),
        Some("0-1") => Some(Some(Color::Black)),
        Some("1/2-1/2") => Some(None),
        _ => None,
    };
    if let Some(winner) = winner {
        if game.outcome().is_none() {
            game.adjudicate(Outcome {
                winner,
                reason: Reason::Adjudication,
            });
        }
    }
    Ok(Some(PgnGame { tags, game, evals }))
}

/// The start from the `FEN` tag, after checking the `Variant` tag.
fn start_position(tags: &[(String, String)]) -> Result<Position, PgnError> {
    if let Some(variant) = find_tag(tags, "Variant") {
        let name = variant.trim().to_ascii_lowercase();
        if name != "chess-mix" && name != "chessmix" {
            return Err(PgnError::Variant(variant.to_string()));
        }
    }
    match find_tag(tags, "FEN") {
        Some(fen) => Ok(Position::from_fen(fen.trim())?),
        None => Ok(Position::start()),
    }
}

/// `12.e4` -> `e4`, `12...` -> ``, `12` -> ``; `0-0` is left alone.
fn strip_move_number(word: &str) -> &str {
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &word[digits..];
    if digits > 0 && rest.is_empty() {
        return rest;
    }
    if digits > 0 && !rest.starts_with('.') {
        return word;
    }
    rest.trim_start_matches('.')
}

enum Token<'a> {
    Tag(String, String),
    /// A move, move number or result.
    Word(&'a str),
    /// The text of a comment outside variations.
    Comment(&'a str),
}

/// Splits PGN into tags, words and comments, skipping variations, NAGs and
/// escape lines. Counts lines for error messages.
struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    /// A tag read ahead that starts the next game.
    pending: Option<(usize, Token<'a>)>,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Lexer<'a> {
        Lexer {
            text: text.strip_prefix('\u{feff}').unwrap_or(text),
            pos: 0,
            line: 1,
            pending: None,
        }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    /// Consumes one char, counting lines.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn eat_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
    }

    fn at_line_start(&self) -> bool {
        self.pos == 0 || self.text.as_bytes()[self.pos - 1] == b'\n'
    }

    fn next(&mut self) -> Result<Option<(usize, Token<'a>)>, PgnError> {
        if let Some(token) = self.pending.take() {
            return Ok(Some(token));
        }
        while let Some(c) = self.peek() {
            let line = self.line;
            match c {
                c if c.is_whitespace() => {
                    self.bump();
                }
                '%' if self.at_line_start() => self.eat_while(|c| c != '\n'),
                ';' => self.eat_while(|c| c != '\n'),
                '{' => {
                    let start = self.pos + 1;
                    self.skip_comment()?;
                    let text = &self.text[start..self.pos - 1];
                    return Ok(Some((line, Token::Comment(text))));
                }
                '(' => self.skip_variation()?,
                '$' => {
                    self.bump();
                    self.eat_while(|c| c.is_ascii_digit());
                }
                '[' => {
                    return self
                        .tag()
                        .map(|(name, value)| Some((line, Token::Tag(name, value))))
                }
                ')' | ']' | '}' => {
                    return Err(PgnError::Token {
                        line,
                        token: c.to_string(),
                    })
                }
                _ => {
                    let start = self.pos;
                    self.eat_while(|c| !c.is_whitespace() && !"{}()[];$".contains(c));
                    return Ok(Some((line, Token::Word(&self.text[start..self.pos]))));
                }
            }
        }
        Ok(None)
    }

    fn skip_comment(&mut self) -> Result<(), PgnError> {
        let line = self.line;
        self.bump();
        self.eat_while(|c| c != '}');
        self.bump().map(drop).ok_or(PgnError::Unterminated {
            line,
            what: "comment",
        })
    }

    /// Skips a variation with the variations and comments nested in it.
    fn skip_variation(&mut self) -> Result<(), PgnError> {
        let line = self.line;
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '{' => {
                    self.skip_comment()?;
                    continue;
                }
                ';' => {
                    self.eat_while(|c| c != '\n');
                    continue;
                }
                _ => {}
            }
            self.bump();
            if depth == 0 {
                return Ok(());
            }
        }
        Err(PgnError::Unterminated {
            line,
            what: "variation",
        })
    }

    /// `[Name "value"]` on one line, with `\"` and `\\` escapes.
    fn tag(&mut self) -> Result<(String, String), PgnError> {
        let line = self.line;
        let malformed = PgnError::Tag { line };
        self.bump();
        self.eat_while(|c| c == ' ' || c == '\t');
        let start = self.pos;
        self.eat_while(|c| c.is_ascii_alphanumeric() || c == '_');
        let name = self.text[start..self.pos].to_string();
        self.eat_while(|c| c == ' ' || c == '\t');
        if name.is_empty() || self.bump() != Some('"') {
            return Err(malformed);
        }
        let mut value = String::new();
        loop {
            match self.bump() {
                Some('"') => break,
                Some('\\') => match self.bump() {
                    Some(c) if c != '\n' => value.push(c),
                    _ => {
                        return Err(PgnError::Unterminated {
                            line,
                            what: "tag value",
                        })
                    }
                },
                Some('\n') | None => {
                    return Err(PgnError::Unterminated {
                        line,
                        what: "tag value",
                    })
                }
                Some(c) => value.push(c),
            }
        }
        self.eat_while(|c| c == ' ' || c == '\t');
        if self.bump() != Some(']') {
            return Err(malformed);
        }
        Ok((name, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn move_numbers() {
        // The token, and what is left of it without its move number.
        let cases = [
            ("12.", ""),
            ("12...", ""),
            ("12", ""),
            ("12.e4", "e4"),
            ("3...Nhg8", "Nhg8"),
            ("...", ""),
            ("0-0", "0-0"),
            ("e4", "e4"),
        ];
        for (token, rest) in cases {
            assert_eq!(strip_move_number(token), rest, "{token}");
        }
    }

    #[test]
    fn tags_are_escaped_and_read_back() {
        let text = write_pgn(
            &Game::new(Position::start()),
            &[
                ("White", "A \"quoted\" \\ name".into()),
                ("Bad Name", "x".into()),
                ("Annotator", "first".into()),
                ("Annotator", "second".into()),
                ("FEN", "ignored".into()),
            ],
        );
        assert!(!text.contains("Bad Name"));
        assert!(!text.contains("SetUp"));
        let read = read_pgn(&text).unwrap();
        assert_eq!(read.tag("White"), Some("A \"quoted\" \\ name"));
        assert_eq!(read.tag("Annotator"), Some("second"));
        assert_eq!(
            read.tags.iter().filter(|(n, _)| n == "Annotator").count(),
            1
        );
        assert_eq!(read.tag("Result"), Some("*"));
        assert_eq!(read.tag("Variant"), Some("Chess-mix"));
        assert!(read.game.moves().is_empty());
    }

    #[test]
    fn lexer_errors_carry_lines() {
        assert_eq!(
            read_pgn("[Event \"x\"]\n\n1. e5 {oops").unwrap_err(),
            PgnError::Unterminated {
                line: 3,
                what: "comment"
            }
        );
        assert_eq!(
            read_pgn("\n1. e5 (e4 (e3)").unwrap_err(),
            PgnError::Unterminated {
                line: 2,
                what: "variation"
            }
        );
        assert_eq!(
            read_pgn("[Event x]").unwrap_err(),
            PgnError::Tag { line: 1 }
        );
        assert_eq!(
            read_pgn("e5 )").unwrap_err(),
            PgnError::Token {
                line: 1,
                token: ")".into()
            }
        );
        assert_eq!(read_pgn(" \n ; nothing\n").unwrap_err(), PgnError::Empty);
    }
}

#[cfg(test)]
mod eval_tests {
    use super::*;

    /// Moves with a score each: White's first, then Black's, and so on.
    fn scored_game(scores: &[Option<Score>]) -> Game {
        let mut game = Game::new(Position::start());
        for _ in scores {
            let mv = game.position().legal_moves()[0];
            game.play(mv).unwrap();
        }
        game
    }

    #[test]
    fn evals_are_written_from_whites_view_and_read_back_as_the_movers() {
        let evals = [
            Some(Score::Centipawns(35)),
            Some(Score::Centipawns(120)),
            None,
            Some(Score::Mate(2)),
            Some(Score::Mate(-1)),
        ];
        let game = scored_game(&evals);
        let text = write_annotated_pgn(&game, &[], &evals);
        // Black's +1.20 is White's -1.20, Black's mate in 2 is #-2, and
        // White mated in 1 is #-1.
        for comment in [
            "{[%eval 0.35]}",
            "{[%eval -1.20]}",
            "{[%eval #-2]}",
            "{[%eval #-1]}",
        ] {
            assert!(text.contains(comment), "{comment} in {text}");
        }
        let read = read_pgn(&text).unwrap();
        assert_eq!(read.game.moves(), game.moves());
        assert_eq!(read.evals, evals);
        // Without evals the text is plain.
        assert_eq!(write_annotated_pgn(&game, &[], &[]), write_pgn(&game, &[]));
        assert_eq!(read_pgn(&write_pgn(&game, &[])).unwrap().evals, [None; 5]);
    }

    #[test]
    fn lichess_comments_and_bad_evals() {
        let read = read_pgn("{[%eval 9.99]} 1. e5 { [%clk 0:01:00] [%eval -0.5,22] } e6 {fine} *")
            .unwrap();
        assert_eq!(read.evals, [Some(Score::Centipawns(-50)), None]);
        for bad in [
            "1. e5 {[%eval x]} *",
            "1. e5 {[%eval 1.0} *",
            "1. e5 {[%eval #}] *",
        ] {
            assert!(
                matches!(read_pgn(bad), Err(PgnError::Eval { line: 1, .. })),
                "{bad}: {:?}",
                read_pgn(bad)
            );
        }
    }
}
