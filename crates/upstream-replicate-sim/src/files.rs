//! Output files are real: `GET /files/{id}/output.{ext}` draws a PNG of the prediction's aspect
//! ratio (a gradient seeded by its id) when fetched, so nothing is kept. The simulator draws
//! only PNGs: a `jpg` prediction's file is a PNG too.

use std::io::Cursor;

use actix_web::{HttpResponse, web};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageEncoder, RgbImage};
use serde_json::Value;

use crate::{Sim, not_found};

/// The longer side of every image: small, since tests fetch them.
const LONG_SIDE: u32 = 256;

/// `GET /files/{id}/{name}`.
pub(crate) async fn serve(sim: web::Data<Sim>, path: web::Path<(String, String)>) -> HttpResponse {
    let (id, name) = path.into_inner();
    let found =
        sim.predictions().get(&id).filter(|p| p.status() == "succeeded").map(|p| (p.extension(), p.input.clone()));
    let Some((_, input)) = found.filter(|(ext, _)| name == format!("output.{ext}")) else {
        return not_found();
    };
    let (width, height) = sides(input.get("aspect_ratio").and_then(Value::as_str).unwrap_or("1:1"));
    match web::block(move || png(width, height, &id)).await {
        Ok(bytes) => HttpResponse::Ok().content_type("image/png").body(bytes),
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

/// Width and height for an aspect ratio `W:H`, the longer side [`LONG_SIDE`].
fn sides(ratio: &str) -> (u32, u32) {
    let (w, h) = ratio
        .split_once(':')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|(w, h)| *w > 0 && *h > 0)
        .unwrap_or((1, 1));
    let short = |a: u32, b: u32| (LONG_SIDE * a / b).max(8);
    if w >= h { (LONG_SIDE, short(h, w)) } else { (short(w, h), LONG_SIDE) }
}

/// A PNG: a diagonal gradient between two colours taken from `seed`'s bytes.
fn png(width: u32, height: u32, seed: &str) -> Vec<u8> {
    let bytes = seed.as_bytes();
    let pick = |i: usize| bytes.get(i % bytes.len().max(1)).copied().unwrap_or(0).wrapping_mul(37);
    let (from, to) = ([pick(0), pick(1), pick(2)], [pick(3), pick(4), pick(5)]);
    let span = width + height;
    let image = RgbImage::from_fn(width, height, |x, y| {
        let t = (x + y) * 255 / span;
        let mix = |a: u8, b: u8| ((u32::from(a) * (255 - t) + u32::from(b) * t) / 255) as u8;
        image::Rgb([mix(from[0], to[0]), mix(from[1], to[1]), mix(from[2], to[2])])
    });
    let mut out = Vec::new();
    let encoder = PngEncoder::new_with_quality(Cursor::new(&mut out), CompressionType::Fast, FilterType::Sub);
    // Encoding into memory fails only on dimensions, which are bounded above.
    let _ = encoder.write_image(image.as_raw(), width, height, image::ExtendedColorType::Rgb8);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use super::*;

    #[test]
    fn images_have_the_aspect_ratio_and_decode() {
        assert_eq!(sides("16:9"), (256, 144));
        assert_eq!(sides("9:21"), (109, 256));
        assert_eq!(sides("nonsense"), (256, 256));
        let decoded = image::load_from_memory_with_format(&png(64, 36, "abc"), image::ImageFormat::Png).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (64, 36));
    }
}
