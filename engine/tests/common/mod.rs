//! Helpers shared by the integration tests.

/// The board field of a FEN from FEN letters by square index.
pub fn board_field(cells: &[Option<char>; 100]) -> String {
    let ranks: Vec<String> = cells
        .chunks(10)
        .rev()
        .map(|rank| {
            let mut text = String::new();
            let mut gap = 0;
            for cell in rank {
                match cell {
                    Some(c) => {
                        if gap > 0 {
                            text += &gap.to_string();
                            gap = 0;
                        }
                        text.push(*c);
                    }
                    None => gap += 1,
                }
            }
            if gap > 0 {
                text += &gap.to_string();
            }
            text
        })
        .collect();
    ranks.join("/")
}
