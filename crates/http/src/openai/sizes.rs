//! OpenAI's `size` (`WxH`) in a model's own terms: the aspect ratio nearest to `W/H` among the
//! model's, and for video the resolution nearest to the shorter side. Nearest is measured on a
//! logarithmic scale, so that 2:1 is as far from 1:1 as 1:2 is; a tie goes to the model's
//! first-listed choice.

use genjobs_domain::invalid::InvalidRequest;

/// A size that OpenAI's clients send: `WxH` in pixels, or `auto` for the model's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// The model's defaults.
    Auto,
    /// Width and height in pixels.
    Pixels { width: u32, height: u32 },
}

impl Size {
    /// Reads `size`.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `size` for anything but `auto` or two positive integers
    /// around an `x`.
    pub fn parse(text: &str) -> Result<Self, InvalidRequest> {
        if text == "auto" {
            return Ok(Self::Auto);
        }
        let refused =
            || InvalidRequest::param("size", format!("`size` must be `auto` or WIDTHxHEIGHT in pixels, not {text:?}"));
        let (width, height) = text.split_once('x').ok_or_else(refused)?;
        let (width, height) =
            (width.parse::<u32>().map_err(|_| refused())?, height.parse::<u32>().map_err(|_| refused())?);
        if width == 0 || height == 0 {
            return Err(refused());
        }
        Ok(Self::Pixels { width, height })
    }

    /// The aspect ratio of `choices` (`W:H` each) nearest to this size; `None` for `auto`, or
    /// when the model lists none it can read.
    #[must_use]
    pub fn nearest_aspect_ratio(self, choices: &[String]) -> Option<String> {
        let Self::Pixels { width, height } = self else { return None };
        let wanted = (f64::from(width) / f64::from(height)).ln();
        nearest(choices, |choice| {
            let (w, h) = choice.split_once(':')?;
            let (w, h) = (w.parse::<f64>().ok()?, h.parse::<f64>().ok()?);
            (w > 0.0 && h > 0.0).then(|| ((w / h).ln() - wanted).abs())
        })
    }

    /// The resolution of `choices` (`720p`, `1080p`, …) nearest to this size's shorter side.
    #[must_use]
    pub fn nearest_resolution(self, choices: &[String]) -> Option<String> {
        let Self::Pixels { width, height } = self else { return None };
        let wanted = f64::from(width.min(height)).ln();
        nearest(choices, |choice| {
            let lines = choice.strip_suffix('p')?.parse::<f64>().ok()?;
            (lines > 0.0).then(|| (lines.ln() - wanted).abs())
        })
    }
}

/// The first of `choices` at the smallest distance; choices `distance` cannot read are skipped.
fn nearest(choices: &[String], distance: impl Fn(&str) -> Option<f64>) -> Option<String> {
    let mut best: Option<(&String, f64)> = None;
    for choice in choices {
        if let Some(d) = distance(choice)
            && best.is_none_or(|(_, best_d)| d < best_d - 1e-9)
        {
            best = Some((choice, d));
        }
    }
    best.map(|(choice, _)| choice.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratios() -> Vec<String> {
        ["16:9", "9:16", "1:1", "4:3", "3:4"].map(String::from).to_vec()
    }

    #[test]
    fn sizes_map_to_the_nearest_ratio() {
        let cases = [
            ("1024x1024", "1:1"),
            ("1792x1024", "16:9"),
            ("1024x1792", "9:16"),
            ("1536x1024", "4:3"),
            ("1024x1536", "3:4"),
            ("1280x720", "16:9"),
            ("256x256", "1:1"),
        ];
        for (size, ratio) in cases {
            assert_eq!(Size::parse(size).unwrap().nearest_aspect_ratio(&ratios()).as_deref(), Some(ratio), "{size}");
        }
        assert_eq!(Size::parse("auto").unwrap().nearest_aspect_ratio(&ratios()), None);
    }

    #[test]
    fn a_tie_goes_to_the_first_listed_ratio() {
        // 2:1 is exactly between 1:1 and 4:1 on the logarithmic scale.
        let choices = ["4:1", "1:1"].map(String::from).to_vec();
        assert_eq!(Size::parse("200x100").unwrap().nearest_aspect_ratio(&choices).as_deref(), Some("4:1"));
    }

    #[test]
    fn video_sizes_pick_the_resolution_of_their_shorter_side() {
        let resolutions = ["720p", "1080p"].map(String::from).to_vec();
        assert_eq!(Size::parse("1280x720").unwrap().nearest_resolution(&resolutions).as_deref(), Some("720p"));
        assert_eq!(Size::parse("720x1280").unwrap().nearest_resolution(&resolutions).as_deref(), Some("720p"));
        assert_eq!(Size::parse("1792x1024").unwrap().nearest_resolution(&resolutions).as_deref(), Some("1080p"));
        assert_eq!(Size::parse("1920x1080").unwrap().nearest_resolution(&[]), None);
    }

    #[test]
    fn malformed_sizes_name_size() {
        for text in ["", "1024", "x1024", "1024x", "0x10", "axb", "1024X1024", "-1x5"] {
            assert_eq!(Size::parse(text).unwrap_err().param.as_deref(), Some("size"), "{text:?}");
        }
    }
}
