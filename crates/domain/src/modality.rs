//! The kinds of media a model produces: a leaf module that the catalog, requests and jobs all
//! name without naming each other.

use std::fmt;

/// Kinds of media a model produces. Only `video` and `image` models exist at present; the others
/// are accepted as a filter so that clients can ask for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// Video generation.
    Video,
    /// Image generation.
    Image,
    /// Audio generation.
    Audio,
    /// Music generation.
    Music,
    /// Speech synthesis.
    Speech,
    /// 3D asset generation.
    #[serde(rename = "3d")]
    ThreeD,
}

impl Modality {
    /// Every modality, in the order the spec lists them.
    pub const ALL: [Modality; 6] =
        [Modality::Video, Modality::Image, Modality::Audio, Modality::Music, Modality::Speech, Modality::ThreeD];

    /// Parses the lowercase name used in the API.
    ///
    /// ```
    /// use genjobs_domain::modality::Modality;
    /// assert_eq!(Modality::parse("3d"), Some(Modality::ThreeD));
    /// assert_eq!(Modality::parse("Video"), None);
    /// ```
    #[must_use]
    pub fn parse(text: &str) -> Option<Modality> {
        Modality::ALL.into_iter().find(|m| m.as_str() == text)
    }

    /// The media types an output of this modality is served as, inline: the raster images and
    /// the videos browsers play, never a type that runs script (HTML, SVG, XML). Other modalities
    /// have none here: their outputs go as attachments.
    #[must_use]
    pub fn inline_media_types(self) -> &'static [&'static str] {
        match self {
            Modality::Image => &["image/png", "image/jpeg", "image/webp", "image/gif", "image/avif"],
            Modality::Video => &["video/mp4", "video/webm", "video/quicktime"],
            Modality::Audio | Modality::Music | Modality::Speech | Modality::ThreeD => &[],
        }
    }

    /// The type an output named `content_type` is served as inline: one of
    /// [`Modality::inline_media_types`], parameters and case aside; `None` sends it as an
    /// attachment of no particular type.
    ///
    /// ```
    /// use genjobs_domain::modality::Modality;
    /// assert_eq!(Modality::Image.inline_media_type("Image/PNG; q=1"), Some("image/png"));
    /// assert_eq!(Modality::Image.inline_media_type("image/svg+xml"), None);
    /// assert_eq!(Modality::Video.inline_media_type("image/png"), None);
    /// ```
    #[must_use]
    pub fn inline_media_type(self, content_type: &str) -> Option<&'static str> {
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        self.inline_media_types().iter().copied().find(|known| known.eq_ignore_ascii_case(essence))
    }

    /// The lowercase name used in the API.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Video => "video",
            Modality::Image => "image",
            Modality::Audio => "audio",
            Modality::Music => "music",
            Modality::Speech => "speech",
            Modality::ThreeD => "3d",
        }
    }

    /// The name with its indefinite article, for sentences.
    ///
    /// ```
    /// use genjobs_domain::modality::Modality;
    /// assert_eq!(format!("{} model", Modality::Image.with_article()), "an image model");
    /// assert_eq!(Modality::Video.with_article(), "a video");
    /// ```
    #[must_use]
    pub fn with_article(self) -> &'static str {
        match self {
            Modality::Video => "a video",
            Modality::Image => "an image",
            Modality::Audio => "an audio",
            Modality::Music => "a music",
            Modality::Speech => "a speech",
            Modality::ThreeD => "a 3d",
        }
    }
}

impl fmt::Display for Modality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
