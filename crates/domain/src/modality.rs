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
