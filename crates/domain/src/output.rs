//! What a succeeded job delivers: a leaf module, so that the catalog (which prices outputs), the
//! job and the provider port can all name it.

/// Kind of an output item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// An image.
    Image,
    /// A video.
    Video,
}

impl OutputKind {
    /// The lowercase name used in the API.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            OutputKind::Image => "image",
            OutputKind::Video => "video",
        }
    }

    /// Parses [`OutputKind::as_str`].
    #[must_use]
    pub fn parse(text: &str) -> Option<OutputKind> {
        [OutputKind::Image, OutputKind::Video].into_iter().find(|k| k.as_str() == text)
    }
}

/// What the provider says about an output.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputMeta {
    /// MIME type, e.g. `image/png`.
    pub content_type: String,
    /// Pixel width, when known.
    pub width: Option<u32>,
    /// Pixel height, when known.
    pub height: Option<u32>,
    /// Length of a video in seconds, when known.
    pub duration_sec: Option<f64>,
    /// The seed the provider used, when it says.
    pub seed: Option<u64>,
}

/// One delivered output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputItem {
    /// Where to fetch it.
    pub url: String,
    /// Image or video.
    pub kind: OutputKind,
    /// What the provider says about it.
    pub meta: OutputMeta,
}
