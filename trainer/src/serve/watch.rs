//! Games to watch: PGN files of a run directory (the trainer writes
//! `pgn/NNNNNNNN.pgn` for each chunk of its own games, so the newest file
//! is the tail of a run in progress; runs from before stores have
//! `games/chunk-*.pgn`), uploaded PGN text, and the games of an arena
//! played in this process (`mixzero arena --serve`), move by move.
//!
//! Paths from the page are confined to the run directory: relative, no
//! `..`, a `.pgn` file whose canonical path lies inside the run directory's.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::SystemTime;

use engine::{read_pgns, Game, PgnGame};
use serde::Serialize;

use super::protocol::{MoveText, OutcomeView, ProtocolError, Rules56};

/// Largest PGN file read from the run directory.
const MAX_PGN_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Files listed, newest first.
const MAX_LISTED: usize = 500;
/// The folders of the run directory whose PGN files are listed besides
/// its top: the trainer's chunks' (`pgn`) and, in runs from before stores,
/// `games`.
const PGN_DIRS: [&str; 2] = ["pgn", "games"];
/// Games of the newest file shown as the live tail.
const LIVE_TAIL: usize = 20;
/// Arena boards kept (one per game played at once).
const MAX_BOARDS: usize = 64;

/// A PGN file of the run directory.
#[derive(Serialize)]
pub struct PgnFile {
    /// Relative to the run directory, with `/`.
    pub path: String,
    pub bytes: u64,
    /// Unix seconds.
    pub modified: u64,
}

/// One game in a list.
#[derive(Serialize)]
pub struct GameSummary {
    pub index: usize,
    pub white: String,
    pub black: String,
    pub result: String,
    pub termination: Option<String>,
    pub plies: usize,
}

/// A list of games, with the file they came from.
#[derive(Serialize)]
pub struct GameList {
    pub file: Option<String>,
    pub games: Vec<GameSummary>,
}

/// One position of a game being stepped through.
#[derive(Serialize)]
pub struct Ply {
    /// The move that led here (`null` at the start).
    #[serde(rename = "move")]
    pub mv: Option<MoveText>,
    pub fen: String,
    pub rules: Rules56,
    pub in_check: bool,
}

/// A whole game, position by position.
#[derive(Serialize)]
pub struct GameView {
    pub tags: Vec<(String, String)>,
    pub plies: Vec<Ply>,
    pub outcome: Option<OutcomeView>,
}

impl GameView {
    pub fn of(game: &Game, tags: Vec<(String, String)>) -> GameView {
        let mut pos = *game.start();
        let mut plies = vec![Ply {
            mv: None,
            fen: pos.fen(),
            rules: Rules56::of(&pos),
            in_check: pos.in_check(),
        }];
        for &mv in game.moves() {
            let san = pos.san(mv);
            pos = pos.after(mv);
            plies.push(Ply {
                mv: Some(MoveText {
                    uci: mv.to_string(),
                    san,
                }),
                fen: pos.fen(),
                rules: Rules56::of(&pos),
                in_check: pos.in_check(),
            });
        }
        GameView {
            tags,
            plies,
            outcome: OutcomeView::of(game),
        }
    }
}

fn summary(index: usize, game: &PgnGame) -> GameSummary {
    let tag = |name: &str| game.tag(name).unwrap_or("?").to_string();
    GameSummary {
        index,
        white: tag("White"),
        black: tag("Black"),
        result: tag("Result"),
        termination: game.tag("Termination").map(str::to_string),
        plies: game.game.moves().len(),
    }
}

pub fn parse_pgn(text: &str) -> Result<Vec<PgnGame>, ProtocolError> {
    read_pgns(text).map_err(|e| ProtocolError::BadPgn(e.to_string()))
}

/// The games of `text`: all summaries, or the view of game `index`.
pub fn pgn_answer(
    text: &str,
    file: Option<String>,
    index: Option<usize>,
) -> Result<serde_json::Value, ProtocolError> {
    let games = parse_pgn(text)?;
    let value = match index {
        Some(i) => {
            let game = games
                .get(i)
                .ok_or_else(|| ProtocolError::NotFound(format!("game {i}")))?;
            serde_json::to_value(GameView::of(&game.game, game.tags.clone()))
        }
        None => serde_json::to_value(GameList {
            file,
            games: games
                .iter()
                .enumerate()
                .map(|(i, g)| summary(i, g))
                .collect(),
        }),
    };
    Ok(value.expect("game views serialise"))
}

/// A run directory the page may read from.
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(path: &Path) -> std::io::Result<RunDir> {
        Ok(RunDir {
            root: path.canonicalize()?,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `rel` inside the run directory: a relative path without `..` to an
    /// existing `.pgn` file that, links resolved, is still inside.
    pub fn confine(&self, rel: &str) -> Result<PathBuf, ProtocolError> {
        let forbidden =
            || ProtocolError::Forbidden(format!("`{rel}` is outside the run directory"));
        let path = Path::new(rel);
        if rel.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(forbidden());
        }
        if path.extension().is_none_or(|e| e != "pgn") {
            return Err(ProtocolError::Forbidden(format!(
                "`{rel}` is not a .pgn file"
            )));
        }
        let full = self
            .root
            .join(path)
            .canonicalize()
            .map_err(|_| ProtocolError::NotFound(rel.to_string()))?;
        if !full.starts_with(&self.root) {
            return Err(forbidden());
        }
        Ok(full)
    }

    pub fn read_pgn(&self, rel: &str) -> Result<String, ProtocolError> {
        let path = self.confine(rel)?;
        let bytes = std::fs::metadata(&path)?.len();
        if bytes > MAX_PGN_FILE_BYTES {
            return Err(ProtocolError::TooLarge {
                limit: MAX_PGN_FILE_BYTES as usize,
            });
        }
        let data = std::fs::read(&path)?;
        String::from_utf8(data).map_err(|_| ProtocolError::NotUtf8)
    }

    /// PGN files at the top of the run directory and in [`PGN_DIRS`],
    /// newest first.
    pub fn list(&self) -> Vec<PgnFile> {
        let mut files = Vec::new();
        for dir in std::iter::once("").chain(PGN_DIRS) {
            let Ok(entries) = std::fs::read_dir(self.root.join(dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                if !meta.is_file() || path.extension().is_none_or(|e| e != "pgn") {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                let modified = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                files.push(PgnFile {
                    path: if dir.is_empty() {
                        name
                    } else {
                        format!("{dir}/{name}")
                    },
                    bytes: meta.len(),
                    modified,
                });
            }
        }
        // Chunk names grow with the run, so ties in mtime break by name.
        files.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.path.cmp(&a.path)));
        files.truncate(MAX_LISTED);
        files
    }

    /// The newest self-play games: the last few of the newest chunk PGN
    /// (by name, which grows with the run; `pgn/` names sort after the
    /// old layout's `games/chunk-`).
    pub fn live(&self) -> Result<GameList, ProtocolError> {
        let newest = self
            .list()
            .into_iter()
            .filter(|f| f.path.starts_with("pgn/") || f.path.starts_with("games/chunk-"))
            .max_by(|a, b| a.path.cmp(&b.path));
        let Some(file) = newest else {
            return Ok(GameList {
                file: None,
                games: Vec::new(),
            });
        };
        let games = parse_pgn(&self.read_pgn(&file.path)?)?;
        let first = games.len().saturating_sub(LIVE_TAIL);
        Ok(GameList {
            file: Some(file.path),
            games: games
                .iter()
                .enumerate()
                .skip(first)
                .map(|(i, g)| summary(i, g))
                .collect(),
        })
    }
}

/// The arena games of this process, one board per game played at once.
#[derive(Default)]
pub struct ArenaBoards {
    boards: Mutex<Vec<Board>>,
}

struct Board {
    /// The arena worker thread playing on it (one game at a time each).
    thread: ThreadId,
    /// Games started on this board so far.
    number: usize,
    names: [String; 2],
    game: Game,
}

/// An arena board in a list.
#[derive(Serialize)]
pub struct BoardSummary {
    pub board: usize,
    pub game_number: usize,
    pub white: String,
    pub black: String,
    pub plies: usize,
    pub outcome: Option<OutcomeView>,
}

impl ArenaBoards {
    /// Records `game` after a move; a game that does not continue the
    /// board's last one starts a new game on that board.
    pub fn observe(&self, names: [&str; 2], game: &Game) {
        let thread = std::thread::current().id();
        let mut boards = self.boards.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = |number| Board {
            thread,
            number,
            names: names.map(str::to_string),
            game: game.clone(),
        };
        match boards.iter().position(|b| b.thread == thread) {
            Some(i) => {
                let board = &mut boards[i];
                let continues = board.game.start() == game.start()
                    && board.game.outcome().is_none()
                    && game.moves().starts_with(board.game.moves());
                *board = fresh(board.number + usize::from(!continues));
            }
            None if boards.len() < MAX_BOARDS => boards.push(fresh(1)),
            None => {}
        }
    }

    pub fn list(&self) -> Vec<BoardSummary> {
        let boards = self.boards.lock().unwrap_or_else(|e| e.into_inner());
        boards
            .iter()
            .enumerate()
            .map(|(i, b)| BoardSummary {
                board: i,
                game_number: b.number,
                white: b.names[0].clone(),
                black: b.names[1].clone(),
                plies: b.game.moves().len(),
                outcome: OutcomeView::of(&b.game),
            })
            .collect()
    }

    pub fn view(&self, board: usize) -> Result<GameView, ProtocolError> {
        let boards = self.boards.lock().unwrap_or_else(|e| e.into_inner());
        let b = boards
            .get(board)
            .ok_or_else(|| ProtocolError::NotFound(format!("board {board}")))?;
        let tags = vec![
            ("White".to_string(), b.names[0].clone()),
            ("Black".to_string(), b.names[1].clone()),
        ];
        Ok(GameView::of(&b.game, tags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Position;

    #[test]
    fn paths_stay_inside_the_run_directory() {
        let outer = tempfile::tempdir().unwrap();
        let run = outer.path().join("run");
        std::fs::create_dir_all(run.join("games")).unwrap();
        std::fs::write(run.join("games/chunk-00000001.pgn"), "").unwrap();
        std::fs::write(outer.path().join("secret.pgn"), "").unwrap();
        std::fs::write(run.join("config.toml"), "").unwrap();
        let dir = RunDir::new(&run).unwrap();
        assert!(dir.confine("games/chunk-00000001.pgn").is_ok());
        for bad in [
            "../secret.pgn",
            "games/../../secret.pgn",
            "/etc/passwd",
            "config.toml",
            "",
            "./games/chunk-00000001.pgn",
        ] {
            assert!(dir.confine(bad).is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path().join("secret.pgn"), run.join("link.pgn"))
                .unwrap();
            assert!(matches!(
                dir.confine("link.pgn"),
                Err(ProtocolError::Forbidden(_))
            ));
        }
        let listed: Vec<String> = dir.list().into_iter().map(|f| f.path).collect();
        assert!(listed.contains(&"games/chunk-00000001.pgn".to_string()));
    }

    #[test]
    fn the_live_tail_is_the_newest_chunk_pgn_of_either_layout() {
        let run = tempfile::tempdir().unwrap();
        let game = "[Variant \"Chess-mix\"]\n[Result \"*\"]\n\n1. e5 *\n\n";
        std::fs::create_dir_all(run.path().join("games")).unwrap();
        std::fs::write(run.path().join("games/chunk-00000007.pgn"), game).unwrap();
        let dir = RunDir::new(run.path()).unwrap();
        let live = dir.live().unwrap();
        assert_eq!(live.file.as_deref(), Some("games/chunk-00000007.pgn"));
        assert_eq!(live.games.len(), 1);
        std::fs::create_dir_all(run.path().join("pgn")).unwrap();
        for name in ["00000000.pgn", "00000001.pgn"] {
            std::fs::write(run.path().join("pgn").join(name), game.repeat(2)).unwrap();
        }
        let live = dir.live().unwrap();
        assert_eq!(live.file.as_deref(), Some("pgn/00000001.pgn"));
        assert_eq!(live.games.len(), 2);
    }

    #[test]
    fn arena_boards_number_their_games() {
        let boards = ArenaBoards::default();
        let mut game = Game::new(Position::start());
        boards.observe(["a", "b"], &game);
        let mv = game.position().parse_move("e2e5").unwrap();
        game.play(mv).unwrap();
        boards.observe(["a", "b"], &game);
        assert_eq!(boards.list()[0].game_number, 1);
        assert_eq!(boards.list()[0].plies, 1);
        boards.observe(["b", "a"], &Game::new(Position::start()));
        assert_eq!(boards.list()[0].game_number, 2);
        assert_eq!(boards.view(0).unwrap().plies.len(), 1);
        assert!(boards.view(1).is_err());
    }
}
