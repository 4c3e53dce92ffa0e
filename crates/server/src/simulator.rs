//! The built-in fal queue simulator, which serves when no provider is configured: a default-on
//! cargo feature (`sim`). A build without it (`--no-default-features`, for production) requires
//! `GENJOBS_UPSTREAM_URL`, and its stand-in for a running simulator cannot be built.

use crate::{Config, StartError};

#[cfg(feature = "sim")]
pub(crate) use genjobs_upstream_sim::RunningSim;

/// The simulator, started on its loopback port (`GENJOBS_SIM_PORT`) when `GENJOBS_UPSTREAM_URL`
/// is unset.
#[cfg(feature = "sim")]
pub(crate) fn start_unless_configured(config: &Config) -> Result<Option<RunningSim>, StartError> {
    if config.upstream_url.is_some() {
        return Ok(None);
    }
    let port = config.simulator.port;
    let running = genjobs_upstream_sim::spawn(config.simulator.clone())
        .map_err(|source| StartError::SimulatorPort { port, source })?;
    Ok(Some(running))
}

/// Without the simulator, `GENJOBS_UPSTREAM_URL` must name the provider.
#[cfg(not(feature = "sim"))]
pub(crate) fn start_unless_configured(config: &Config) -> Result<Option<RunningSim>, StartError> {
    match &config.upstream_url {
        Some(_) => Ok(None),
        None => Err(StartError::NoUpstream),
    }
}

/// What a running simulator offers, in a build that has none: no value of it exists.
#[cfg(not(feature = "sim"))]
pub(crate) struct RunningSim {
    pub(crate) base_url: String,
    never: std::convert::Infallible,
}

#[cfg(not(feature = "sim"))]
impl RunningSim {
    pub(crate) fn jwks_url(&self) -> String {
        match self.never {}
    }

    pub(crate) async fn stop(&self) {
        match self.never {}
    }
}
