//! The files a result names are real: `GET /_sim/files/{request id}/{i}-{width}x{height}.png` is
//! a PNG of that size (a gradient seeded by the request id and the index, drawn when fetched), and
//! `…/0.mp4` a small real MP4 (`assets/sample.mp4`) served with byte ranges, as a video player
//! asks for them. A link says all that draws its file, so nothing is kept: a simulator that
//! restarted on the same port serves the links of the requests it no longer remembers, as a
//! provider's media host outlives its queue.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Cursor;

use actix_web::http::StatusCode;
use actix_web::http::header::{ACCEPT_RANGES, CONTENT_RANGE, CONTENT_TYPE};
use actix_web::{HttpRequest, HttpResponse, web};
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageEncoder, RgbImage};
use serde_json::{Value, json};

use crate::Sim;

/// `GET /_sim/files/{request id}/{name}`: the file a result names.
pub(crate) async fn serve(sim: web::Data<Sim>, req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (id, name) = path.into_inner();
    sim.state.count("file", Some(&id));
    if sim.state.requests().all.get(&id).is_some_and(|request| request.directives.file_missing) {
        return crate::not_found();
    }
    if name == "0.mp4" {
        let range = req.headers().get(actix_web::http::header::RANGE).and_then(|v| v.to_str().ok());
        return ranged(SAMPLE_MP4, "video/mp4", range);
    }
    let Some((index, width, height)) = image_name(&name) else {
        return crate::not_found();
    };
    match web::block(move || png(width, height, &(id, index))).await {
        Ok(png) => HttpResponse::Ok().content_type("image/png").body(png),
        Err(_) => HttpResponse::InternalServerError().json(json!({"detail": "could not draw the image"})),
    }
}

/// The name of image `index` of `width`×`height`, as a result's link ends.
pub(crate) fn image_name_of(index: u64, (width, height): (u32, u32)) -> String {
    format!("{index}-{width}x{height}.png")
}

/// The index and size an image's name says (`1-1024x576.png`), within what a request can ask
/// for, so that a link made up draws nothing larger.
fn image_name(name: &str) -> Option<(u64, u32, u32)> {
    let (index, size) = name.strip_suffix(".png")?.split_once('-')?;
    let (width, height) = size.split_once('x')?;
    let index = index.parse::<u64>().ok().filter(|i| *i < MAX_IMAGES)?;
    let side = |text: &str| text.parse::<u32>().ok().filter(|s| (MIN_SIDE..=MAX_SIDE).contains(s));
    Some((index, side(width)?, side(height)?))
}

/// The sample video: 2 s of a test pattern, 320×180, H.264 with the index first (`faststart`).
pub(crate) const SAMPLE_MP4: &[u8] = include_bytes!("../assets/sample.mp4");

/// The most images a request asks for.
const MAX_IMAGES: u64 = 4;

/// How many images a request asks for (`num_images`, 1 to [`MAX_IMAGES`]).
pub(crate) fn image_count(input: &Value) -> u64 {
    input.get("num_images").and_then(Value::as_u64).unwrap_or(1).clamp(1, MAX_IMAGES)
}

/// The longer side of an image whose size is given by its ratio.
const LONG_SIDE: u32 = 1024;

/// The bounds of a side given in pixels.
const MIN_SIDE: u32 = 16;
const MAX_SIDE: u32 = 2 * LONG_SIDE;

/// Width and height of the images a request asks for: its `aspect_ratio` (`"16:9"`), its
/// `image_size` (a preset such as `landscape_16_9`, or `{width, height}`), or a square.
pub(crate) fn image_size(input: &Value) -> (u32, u32) {
    if let Some(size) = input.get("image_size") {
        if let (Some(w), Some(h)) =
            (size.get("width").and_then(Value::as_u64), size.get("height").and_then(Value::as_u64))
        {
            return (clamp_side(w), clamp_side(h));
        }
        let ratio = match size.as_str() {
            Some("square") => return (512, 512),
            Some("portrait_4_3") => (3, 4),
            Some("portrait_16_9") => (9, 16),
            Some("landscape_4_3") => (4, 3),
            Some("landscape_16_9") => (16, 9),
            _ => (1, 1),
        };
        return sides(ratio);
    }
    let ratio = input
        .get("aspect_ratio")
        .and_then(Value::as_str)
        .and_then(|r| r.split_once(':'))
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|(w, h)| *w > 0 && *h > 0)
        .unwrap_or((1, 1));
    sides(ratio)
}

fn clamp_side(side: u64) -> u32 {
    u32::try_from(side).unwrap_or(LONG_SIDE).clamp(MIN_SIDE, MAX_SIDE)
}

/// The longer side is [`LONG_SIDE`]; the shorter follows the ratio, rounded to a multiple of 8.
fn sides((w, h): (u32, u32)) -> (u32, u32) {
    let short = |a: u32, b: u32| ((u64::from(LONG_SIDE) * u64::from(a) / u64::from(b)) as u32 + 4) / 8 * 8;
    if w >= h { (LONG_SIDE, short(h, w).max(8)) } else { (short(w, h).max(8), LONG_SIDE) }
}

/// A PNG of `width`×`height`: a diagonal gradient between two colours drawn from `seed`.
pub(crate) fn png(width: u32, height: u32, seed: &impl Hash) -> Vec<u8> {
    let mut hasher = DefaultHasher::new();
    seed.hash(&mut hasher);
    let bits = hasher.finish().to_le_bytes();
    let (from, to) = ([bits[0], bits[1], bits[2]], [bits[3], bits[4], bits[5]]);
    let span = u64::from(width + height).max(1);
    let image = RgbImage::from_fn(width, height, |x, y| {
        let t = u64::from(x + y) * 255 / span;
        let mix = |a: u8, b: u8| ((u64::from(a) * (255 - t) + u64::from(b) * t) / 255) as u8;
        image::Rgb([mix(from[0], to[0]), mix(from[1], to[1]), mix(from[2], to[2])])
    });
    let mut bytes = Vec::new();
    let encoder = PngEncoder::new_with_quality(Cursor::new(&mut bytes), CompressionType::Fast, FilterType::Sub);
    // Encoding into memory fails only on dimensions, which are bounded above.
    let _ = encoder.write_image(image.as_raw(), width, height, image::ExtendedColorType::Rgb8);
    bytes
}

/// `bytes`, whole or the one range that `range` (a `Range` header) asks for.
pub(crate) fn ranged(bytes: &'static [u8], content_type: &str, range: Option<&str>) -> HttpResponse {
    let len = bytes.len();
    let Some(spec) = range.and_then(|r| r.strip_prefix("bytes=")).filter(|s| !s.contains(',')) else {
        return HttpResponse::Ok()
            .insert_header((CONTENT_TYPE, content_type))
            .insert_header((ACCEPT_RANGES, "bytes"))
            .body(bytes);
    };
    let bounds = match spec.split_once('-') {
        Some(("", suffix)) => suffix.parse::<usize>().ok().filter(|n| *n > 0).map(|n| (len.saturating_sub(n), len - 1)),
        Some((start, "")) => start.parse::<usize>().ok().map(|s| (s, len - 1)),
        Some((start, end)) => {
            start.parse::<usize>().ok().zip(end.parse::<usize>().ok()).map(|(s, e)| (s, e.min(len - 1)))
        }
        None => None,
    };
    match bounds.filter(|(start, end)| start <= end && *start < len) {
        Some((start, end)) => HttpResponse::build(StatusCode::PARTIAL_CONTENT)
            .insert_header((CONTENT_TYPE, content_type))
            .insert_header((ACCEPT_RANGES, "bytes"))
            .insert_header((CONTENT_RANGE, format!("bytes {start}-{end}/{len}")))
            .body(&bytes[start..=end]),
        None => HttpResponse::build(StatusCode::RANGE_NOT_SATISFIABLE)
            .insert_header((CONTENT_RANGE, format!("bytes */{len}")))
            .finish(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use serde_json::json;

    use super::*;

    #[test]
    fn sizes_follow_the_aspect_ratio_or_the_preset() {
        assert_eq!(image_size(&json!({})), (1024, 1024));
        assert_eq!(image_size(&json!({"aspect_ratio": "16:9"})), (1024, 576));
        assert_eq!(image_size(&json!({"aspect_ratio": "9:16"})), (576, 1024));
        assert_eq!(image_size(&json!({"aspect_ratio": "auto"})), (1024, 1024));
        assert_eq!(image_size(&json!({"image_size": "landscape_4_3"})), (1024, 768));
        assert_eq!(image_size(&json!({"image_size": "square"})), (512, 512));
        assert_eq!(image_size(&json!({"image_size": {"width": 300, "height": 200}})), (300, 200));
    }

    #[test]
    fn the_png_has_the_size_and_differs_by_seed() {
        let bytes = png(64, 36, &"a lighthouse");
        let decoded = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (64, 36));
        assert_ne!(bytes, png(64, 36, &"another prompt"));
        assert_eq!(bytes, png(64, 36, &"a lighthouse"), "the same seed draws the same image");
    }

    #[test]
    fn an_image_name_says_its_index_and_size_within_bounds() {
        assert_eq!(image_name(&image_name_of(1, (1024, 576))), Some((1, 1024, 576)));
        assert_eq!(image_name("0-16x2048.png"), Some((0, 16, 2048)));
        for made_up in
            ["4-64x64.png", "0-64x99999.png", "0-0x64.png", "0-15x64.png", "0.png", "0-64x64.jpg", "x-64x64.png"]
        {
            assert_eq!(image_name(made_up), None, "{made_up}");
        }
    }
}
