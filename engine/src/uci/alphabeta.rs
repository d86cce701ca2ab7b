//! The alpha-beta player as a UCI engine (`mixchess uci`): its options and
//! its searches through the protocol's [`UciSearcher`].

use super::{OptionKind, OptionValue, UciOption, UciSearcher};
use crate::game::Game;
use crate::players::{AlphaBeta, MAX_DEPTH};
use crate::position::Move;
use crate::search::{SearchInfo, SearchLimits};

impl UciSearcher for AlphaBeta {
    fn id_name(&self) -> String {
        "mixchess alphabeta".to_string()
    }

    fn id_author(&self) -> String {
        "the mixzero authors".to_string()
    }

    fn options(&self) -> Vec<UciOption> {
        vec![
            UciOption {
                name: "Depth".to_string(),
                kind: OptionKind::Spin {
                    default: self.depth().into(),
                    min: 1,
                    max: MAX_DEPTH.into(),
                },
            },
            UciOption {
                name: "Seed".to_string(),
                kind: OptionKind::Spin {
                    default: 0,
                    min: 0,
                    max: i64::MAX,
                },
            },
        ]
    }

    fn set_option(&mut self, name: &str, value: &OptionValue) -> Result<(), String> {
        match (name, value) {
            ("Depth", &OptionValue::Spin(depth)) => self.set_depth(
                u32::try_from(depth).map_err(|_| format!("depth {depth} is out of range"))?,
            ),
            ("Seed", &OptionValue::Spin(seed)) => self.set_seed(seed.unsigned_abs()),
            _ => return Err(format!("cannot set `{name}` to {value:?}")),
        }
        Ok(())
    }

    fn new_game(&mut self) {
        AlphaBeta::new_game(self);
    }

    fn search(
        &mut self,
        game: &Game,
        limits: &SearchLimits,
        info: &mut dyn FnMut(&SearchInfo),
    ) -> Move {
        self.search_limited(game, limits, info).best
    }
}
