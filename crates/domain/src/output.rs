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
    /// Where the provider serves it.
    pub url: String,
    /// Image or video.
    pub kind: OutputKind,
    /// What the provider says about it.
    pub meta: OutputMeta,
    /// Whether the gateway kept its own copy; `None` where it keeps none (no output store).
    pub copy: Option<OutputCopy>,
}

/// The gateway's copy of an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputCopy {
    /// Copied into the output store: the output is served from there, as long as the job lives.
    Stored(StoredFile),
    /// The copy kept failing; the output is only at the provider's URL, for as long as the
    /// provider keeps it.
    Failed,
}

/// A file the output store holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Its length in bytes.
    pub size: u64,
    /// Its MIME type, as the provider served it.
    pub content_type: String,
    /// Hex SHA-256 of its bytes: a strong validator for HTTP caches (`ETag`).
    pub sha256: String,
}
