//! `genjobs models import`: a draft model document from a provider's endpoint schema.

use std::path::Path;

use super::ImportProvider;
use crate::cli_error::CliError;

/// What `genjobs models import` asks for.
#[derive(Debug, Clone, Copy)]
pub struct ImportRequest<'a> {
    /// The provider.
    pub provider: ImportProvider,
    /// Its endpoint id.
    pub endpoint: &'a str,
    /// The model id, if given.
    pub id: Option<&'a str>,
    /// Whether to read the schema online first.
    pub online: bool,
    /// The operator's schema file.
    pub schemas: Option<&'a Path>,
    /// Where the provider serves its schemas.
    pub schema_url: &'a str,
}

/// A draft model document for an endpoint, as `genjobs models import` prints it, and a warning
/// when an online read failed and the draft comes from the schemas held.
///
/// # Errors
/// [`CliError::Invalid`] when no schema of the endpoint is held or read, or the operator's
/// schema file cannot be read or written.
pub async fn import(request: ImportRequest<'_>) -> Result<(String, Option<String>), CliError> {
    use genjobs_upstream_fal::schema::{self, EndpointsFile};
    let ImportProvider::Fal = request.provider;
    let endpoint_id = request.endpoint;
    let mut held = match request.schemas {
        Some(path) if path.exists() => std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| schema::read_endpoints_file(&text))
            .map_err(|e| CliError::Invalid(format!("{}: {e}", path.display())))?,
        _ => EndpointsFile::default(),
    };
    let mut endpoint = held.endpoints.get(endpoint_id).or_else(|| schema::endpoint(endpoint_id)).cloned();
    let mut warning = None;
    if request.online {
        match schema::fetch_online(request.schema_url, endpoint_id).await {
            Ok(read) => {
                if let Some(path) = request.schemas {
                    held.endpoints.insert(endpoint_id.to_owned(), read.clone());
                    let text = serde_json::to_string_pretty(&held).unwrap_or_default();
                    std::fs::write(path, text + "\n")
                        .map_err(|e| CliError::Invalid(format!("cannot write {}: {e}", path.display())))?;
                }
                endpoint = Some(read);
            }
            Err(e) => {
                warning = Some(format!(
                    "fal's schema of {endpoint_id} could not be read online ({e}); drafting from the schemas held"
                ));
            }
        }
    }
    let endpoint = endpoint.ok_or_else(|| {
        let online = warning.as_deref().map_or_else(String::new, |w| format!(" ({w})"));
        CliError::Invalid(format!(
            "genjobs holds no schema of the fal endpoint {endpoint_id:?}; read it with --online, or add it to the file of GENJOBS_FAL_SCHEMAS{online}"
        ))
    })?;
    let draft = genjobs_upstream_fal::draft_from_schema(request.id, endpoint_id, &endpoint);
    Ok((serde_json::to_string_pretty(&draft).unwrap_or_default(), warning))
}
