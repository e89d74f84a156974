use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use parley_domain::validation::{FieldError, LocPart};

use crate::error::ApiError;

/// The route's path parameters as text, in order. A parameter that is not
/// valid UTF-8 once percent-decoded is a 422 at `["path", <name>]`.
async fn params(parts: &mut Parts) -> Result<Vec<(String, String)>, ApiError> {
    match RawPathParams::from_request_parts(parts, &()).await {
        Ok(params) => Ok(params.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()),
        Err(RawPathParamsRejection::InvalidUtf8InPathParam(e)) => {
            // axum names the parameter only in its message: "Invalid UTF-8 in `name`".
            let text = e.body_text();
            let name = text.split('`').nth(1).unwrap_or("id").to_owned();
            Err(ApiError::Validation(vec![FieldError::new(
                vec![LocPart::from("path"), LocPart::from(name.as_str())],
                "value_error.utf8",
                "not valid UTF-8 once percent-decoded",
            )]))
        }
        Err(e) => Err(ApiError::Internal(format!("path parameters unavailable: {e}"))),
    }
}

/// The route's `N` integer path parameters, in order. A value that is not an
/// integer is a 422 at `["path", <name>]`.
pub struct Ids<const N: usize>(pub [i64; N]);

impl<const N: usize, S: Send + Sync> FromRequestParts<S> for Ids<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let params = params(parts).await?;
        if params.len() != N {
            return Err(ApiError::Internal(format!("route has {} path parameters, handler expects {N}", params.len())));
        }
        let mut out = [0i64; N];
        let mut errors = Vec::new();
        for (i, (name, value)) in params.iter().enumerate() {
            match parley_domain::validation::parse_integer_text(value) {
                Ok(v) => out[i] = v,
                Err(_) => errors
                    .push(FieldError::wrong_type(vec![LocPart::from("path"), LocPart::from(name.as_str())], "integer")),
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        Ok(Ids(out))
    }
}

/// The route's one text path parameter (a call id, a public channel id, a
/// file key), percent-decoded.
pub struct PathText(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathText {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut params = params(parts).await?;
        match params.pop() {
            Some((_, value)) if params.is_empty() => Ok(PathText(value)),
            _ => Err(ApiError::Internal("PathText is for routes with one path parameter".into())),
        }
    }
}
