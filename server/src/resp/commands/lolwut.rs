//! LOLWUT: Redis's art command. `LOLWUT [VERSION 5] [columns [squares-per-row
//! [squares-per-col]]]` draws Georg Nees's *Schotter* (1968), as Redis 5's LOLWUT does: a
//! grid of squares, each rotated and shifted further the lower its row, drawn on a canvas
//! of pixels rendered two by four to a Braille character. It is the default here, where
//! Redis 7 draws its own version 6's art; any other version answers the server's version
//! line only, as Redis answers for versions without art.

use crate::resp::call::Call;
use crate::resp::reply::parse_i64;
use accelkv_proto::resp;
use rand::Rng;

/// The version line's server version (INFO's `redis_version`).
const VERSION: &str = "7.0.0";

/// A canvas of pixels, row by row.
struct Canvas {
    width: i64,
    height: i64,
    pixels: Vec<bool>,
}

impl Canvas {
    fn new(width: i64, height: i64) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![false; (width * height) as usize],
        }
    }

    fn set(&mut self, x: i64, y: i64) {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(y * self.width + x) as usize] = true;
        }
    }

    fn get(&self, x: i64, y: i64) -> bool {
        (0..self.width).contains(&x)
            && (0..self.height).contains(&y)
            && self.pixels[(y * self.width + x) as usize]
    }

    /// A line from `(x1, y1)` to `(x2, y2)` (Bresenham's).
    fn line(&mut self, (mut x1, mut y1): (i64, i64), (x2, y2): (i64, i64)) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on `(x, y)`, turned by `angle` radians.
    fn square(&mut self, (x, y): (i64, i64), size: f64, angle: f64) {
        let half = size / 2.0;
        let corners: Vec<(i64, i64)> = (0..4)
            .map(|j| {
                let a = std::f64::consts::FRAC_PI_4 + std::f64::consts::FRAC_PI_2 * j as f64;
                let (px, py) = (a.sin() * half * 1.414, a.cos() * half * 1.414);
                let (rx, ry) = (
                    px * angle.cos() - py * angle.sin(),
                    px * angle.sin() + py * angle.cos(),
                );
                ((rx + x as f64) as i64, (ry + y as f64) as i64)
            })
            .collect();
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4]);
        }
    }

    /// The canvas as text: each 2×4 block of pixels one Braille character.
    fn render(&self) -> String {
        let mut out = String::new();
        for y in (0..self.height).step_by(4) {
            for x in (0..self.width).step_by(2) {
                // Braille dots 1-8 of the block's pixels, column by column.
                let dots = [
                    (0, 0),
                    (0, 1),
                    (0, 2),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (0, 3),
                    (1, 3),
                ];
                let bits = dots
                    .iter()
                    .enumerate()
                    .filter(|(_, (dx, dy))| self.get(x + dx, y + dy))
                    .fold(0u32, |b, (i, _)| b | 1 << i);
                out.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
            }
            out.push('\n');
        }
        out
    }
}

/// Schotter on a console `cols` characters wide, `per_row` squares by `per_col`.
fn schotter(cols: i64, per_row: i64, per_col: i64) -> String {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f64 / per_row as f64;
    let height = (side * per_col as f64) as i64 + padding * 2;
    let mut c = Canvas::new(width, height);
    let mut rng = rand::thread_rng();
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f64 * side + side / 2.0) as i64 + padding;
            let mut sy = (y as f64 * side + side / 2.0) as i64 + padding;
            let mut angle = 0.0;
            if y > 1 {
                // The lower the row, the more disorder (Nees's recipe).
                let disorder = |rng: &mut rand::rngs::ThreadRng| {
                    let r: f64 = rng.gen::<f64>() / per_col as f64 * y as f64;
                    if rng.gen::<bool>() {
                        -r
                    } else {
                        r
                    }
                };
                angle = disorder(&mut rng);
                sx += (disorder(&mut rng) * side / 3.0) as i64;
                sy += (disorder(&mut rng) * side / 3.0) as i64;
            }
            c.square((sx, sy), side, angle);
        }
    }
    c.render()
}

/// `LOLWUT [VERSION v] [columns [squares-per-row [squares-per-col]]]`.
pub fn lolwut(x: &mut Call<'_, '_>) {
    let mut args = &x.args[1..];
    let mut version = 5;
    if args
        .first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"VERSION"))
    {
        match args.get(1).and_then(|v| parse_i64(v)) {
            Some(v) => version = v,
            None => return resp::error(x.out, "ERR value is not an integer or out of range"),
        }
        args = &args[2..];
    }
    let line = format!("Redis ver. {VERSION}\n");
    if version != 5 {
        return resp::verbatim(x.out, line.as_bytes(), x.s.proto);
    }
    let mut n = [66, 8, 12];
    for (i, a) in args.iter().take(3).enumerate() {
        match parse_i64(a) {
            Some(v) => n[i] = v,
            None => return resp::error(x.out, "ERR value is not an integer or out of range"),
        }
    }
    let [cols, per_row, per_col] = [n[0].clamp(1, 1000), n[1].clamp(1, 200), n[2].clamp(1, 200)];
    let mut text = schotter(cols, per_row, per_col);
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. ");
    text.push_str(&line);
    resp::verbatim(x.out, text.as_bytes(), x.s.proto)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_fills_its_width_and_rows() {
        let art = schotter(20, 2, 3);
        let rows: Vec<&str> = art.lines().collect();
        assert!(rows.iter().all(|r| r.chars().count() == 20), "{art}");
        // Two squares a row, three rows: something is drawn in each third of the height.
        let thirds = rows.len() / 3;
        for t in 0..3 {
            let band = &rows[t * thirds..(t + 1) * thirds];
            assert!(
                band.iter().any(|r| r.chars().any(|c| c != '\u{2800}')),
                "{art}"
            );
        }
    }

    #[test]
    fn a_line_reaches_both_ends() {
        let mut c = Canvas::new(10, 10);
        c.line((0, 0), (9, 5));
        assert!(c.get(0, 0) && c.get(9, 5));
        assert_eq!(c.pixels.iter().filter(|p| **p).count(), 10);
    }
}
