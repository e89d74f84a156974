use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use parley_domain::validation::{FieldError, LocPart};

use crate::error::ApiError;
use crate::state::AppState;

/// The route's `N` integer path parameters, in order. A value that is not an
/// integer is a 422 at `["path", <name>]`.
pub struct Ids<const N: usize>(pub [i64; N]);

impl<const N: usize> FromRequestParts<AppState> for Ids<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::Internal(format!("path parameters unavailable: {e}")))?;
        let mut out = [0i64; N];
        let mut errors = Vec::new();
        let mut n = 0;
        for (name, value) in params.iter() {
            if n == N {
                break;
            }
            match value.parse::<i64>() {
                Ok(v) => out[n] = v,
                Err(_) => {
                    errors.push(FieldError::wrong_type(vec![LocPart::from("path"), LocPart::from(name)], "integer"))
                }
            }
            n += 1;
        }
        if n != N {
            return Err(ApiError::Internal(format!("route has {n} path parameters, handler expects {N}")));
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        Ok(Ids(out))
    }
}
