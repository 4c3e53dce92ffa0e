//! Images clients upload: what counts as an image (by its bytes, never by its name or declared
//! type), how large an upload may be, how long it is kept and how much one user may upload a day.
//! The images of OpenAI's `images.edit` and the native `POST /api/v1/uploads` follow the same
//! rules. An upload is known by its content ([`UploadDigest`], its SHA-256), so that the same
//! bytes uploaded again are kept once; its link names it with its format ([`UploadName`]).

use std::time::Duration;

use sha2::{Digest, Sha256};

/// Most bytes of one upload, and of the images of one edit together.
pub const MAX_UPLOAD_BYTES: usize = 20 << 20;

/// How long an upload is kept, by default (`GENJOBS_UPLOAD_TTL_SECS`).
pub const DEFAULT_UPLOAD_TTL: Duration = Duration::from_secs(24 * 3600);
/// How many bytes one user may upload per UTC day, by default (`GENJOBS_UPLOAD_BYTES_PER_DAY`).
pub const DEFAULT_UPLOAD_BYTES_PER_DAY: u64 = 1 << 30;

/// How long uploads are kept and how much one user may upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadSettings {
    /// An upload (and its link) lives this long after it was made, unless a job not yet final
    /// still names it.
    pub ttl: Duration,
    /// Bytes one user may upload per UTC day, the images of edits included.
    pub bytes_per_day: u64,
}

impl Default for UploadSettings {
    fn default() -> Self {
        Self { ttl: DEFAULT_UPLOAD_TTL, bytes_per_day: DEFAULT_UPLOAD_BYTES_PER_DAY }
    }
}

/// An upload's content: the SHA-256 of its bytes, in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UploadDigest(String);

impl UploadDigest {
    /// The digest of `bytes`.
    #[must_use]
    pub fn of(bytes: &[u8]) -> Self {
        Self(hex_of(&Sha256::digest(bytes)))
    }

    /// A digest as [`UploadDigest::as_str`] spells it; `None` for anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .then(|| Self(text.to_owned()))
    }

    /// Its 64 lowercase hex digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for UploadDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn hex_of(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// What an upload's link names: its content and its format, `{sha256}.{ext}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadName {
    /// Its content.
    pub digest: UploadDigest,
    /// Its format, from its bytes.
    pub format: ImageFormat,
}

impl UploadName {
    /// The name as links spell it.
    #[must_use]
    pub fn as_path(&self) -> String {
        format!("{}.{}", self.digest, self.format.extension())
    }

    /// A name as [`UploadName::as_path`] spells it; `None` for anything else.
    #[must_use]
    pub fn parse(path: &str) -> Option<Self> {
        let (digest, extension) = path.split_once('.')?;
        Some(Self { digest: UploadDigest::parse(digest)?, format: ImageFormat::from_extension(extension)? })
    }
}

/// An image format clients may upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// WebP.
    Webp,
    /// GIF.
    Gif,
}

impl ImageFormat {
    /// The format of an image, from its first bytes; `None` for anything else.
    #[must_use]
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            Some(Self::Webp)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(Self::Gif)
        } else {
            None
        }
    }

    /// Its media type, e.g. `image/png`.
    #[must_use]
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Webp => "image/webp",
            Self::Gif => "image/gif",
        }
    }

    /// Its usual file extension, e.g. `png`.
    #[must_use]
    pub fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpg",
            Self::Webp => "webp",
            Self::Gif => "gif",
        }
    }

    /// The format of [`ImageFormat::extension`].
    #[must_use]
    pub fn from_extension(extension: &str) -> Option<Self> {
        [Self::Png, Self::Jpeg, Self::Webp, Self::Gif].into_iter().find(|format| format.extension() == extension)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_bytes() {
        let webp = [b"RIFF".as_slice(), &[0, 0, 0, 0], b"WEBPVP8 "].concat();
        for (bytes, expected) in [
            (b"\x89PNG\r\n\x1a\n\0\0".as_slice(), Some(ImageFormat::Png)),
            (&[0xFF, 0xD8, 0xFF, 0xE0], Some(ImageFormat::Jpeg)),
            (&webp, Some(ImageFormat::Webp)),
            (b"GIF89a..", Some(ImageFormat::Gif)),
            (b"<svg xmlns=", None),
            (b"RIFF\0\0\0\0WAVE", None),
            (b"", None),
        ] {
            assert_eq!(ImageFormat::sniff(bytes), expected, "{bytes:?}");
        }
    }

    #[test]
    fn an_upload_is_named_by_its_content_and_format_both_ways() {
        let digest = UploadDigest::of(b"abc");
        assert_eq!(digest.as_str(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let name = UploadName { digest: digest.clone(), format: ImageFormat::Webp };
        assert_eq!(UploadName::parse(&name.as_path()), Some(name));
        for refused in ["", "abc.png", &format!("{digest}.svg"), &format!("{}.png", digest.as_str().to_uppercase())] {
            assert_eq!(UploadName::parse(refused), None, "{refused}");
        }
    }

    #[test]
    fn extensions_name_their_format_both_ways() {
        for format in [ImageFormat::Png, ImageFormat::Jpeg, ImageFormat::Webp, ImageFormat::Gif] {
            assert_eq!(ImageFormat::from_extension(format.extension()), Some(format));
        }
        assert_eq!(ImageFormat::from_extension("svg"), None);
    }
}
