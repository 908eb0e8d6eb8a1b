//! [`AbideLayer`]: wraps a client service in an [`AbideService`].

use tower::Layer;

use crate::service::AbideService;
use abide_client::Policy;

/// Applies a [`Policy`] to a client service.
///
/// # Clone
/// Every service this layer makes shares the policy's per-host state.
#[derive(Debug, Clone, Default)]
pub struct AbideLayer {
    policy: Policy,
}

impl AbideLayer {
    /// A layer applying `policy`.
    pub fn new(policy: Policy) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for AbideLayer {
    type Service = AbideService<S>;

    fn layer(&self, inner: S) -> AbideService<S> {
        AbideService::new(inner, self.policy.clone())
    }
}
