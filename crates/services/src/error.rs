use parley_domain::validation::FieldError;
use parley_store::StoreError;
use thiserror::Error;

/// What a use case can refuse, in terms the HTTP layer maps one-to-one.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// The resource does not exist in the caller's scope (or belongs to
    /// another workspace or mode: the two are indistinguishable on purpose).
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    PaymentRequired(String),
    /// A limit on things at once (concurrent calls) is reached.
    #[error("{0}")]
    TooManyRequests(String),
    /// A backend the request needs (object storage) cannot serve it now.
    #[error("{0}")]
    Unavailable(String),
    /// A provider Parley asked on the caller's behalf failed or refused.
    #[error("{0}")]
    BadGateway(String),
    /// A request with this idempotency key is still running.
    #[error("a request with this idempotency key is still in progress")]
    KeyInUse,
    #[error(transparent)]
    Store(StoreError),
    /// A failure that is nobody's input: a bug or a broken dependency. It
    /// keeps its source chain, logged once by whoever answers the caller.
    #[error("internal error: {0:#}")]
    Internal(anyhow::Error),
}

impl ServiceError {
    pub fn not_found(kind: &'static str, id: impl ToString) -> Self {
        ServiceError::NotFound { kind, id: id.to_string() }
    }
}

impl ServiceError {
    /// An internal failure with its cause, e.g. `ServiceError::internal(join_error, "the call engine stopped")`.
    pub fn internal<E>(source: E, context: &'static str) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        ServiceError::Internal(anyhow::Error::new(source).context(context))
    }

    /// An internal failure that has no source error (a broken invariant).
    pub fn invariant(message: impl std::fmt::Display + Send + Sync + 'static) -> Self {
        ServiceError::Internal(anyhow::Error::msg(message.to_string()))
    }
}

impl ServiceError {
    /// The HTTP status every door answers this refusal with (REST as the
    /// response status, MCP in its tool error).
    pub fn http_status(&self) -> u16 {
        match self {
            ServiceError::NotFound { .. } => 404,
            ServiceError::Validation(_) => 422,
            ServiceError::Conflict(_) | ServiceError::KeyInUse => 409,
            ServiceError::Unauthorized(_) => 401,
            ServiceError::Forbidden(_) => 403,
            ServiceError::BadRequest(_) => 400,
            ServiceError::PaymentRequired(_) => 402,
            ServiceError::TooManyRequests(_) => 429,
            ServiceError::Unavailable(_) => 503,
            ServiceError::BadGateway(_) => 502,
            ServiceError::Store(_) | ServiceError::Internal(_) => 500,
        }
    }
}

/// What a request is told when the database cannot be reached.
pub const DATABASE_UNAVAILABLE: &str = "The database is unavailable; retry shortly";

impl From<StoreError> for ServiceError {
    /// A database that cannot be reached is a 503 the caller may retry
    /// (with `Retry-After`), not a 500.
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            // Logged once per outage, where it starts (`parley_store::Db`).
            ServiceError::Unavailable(DATABASE_UNAVAILABLE.to_owned())
        } else {
            ServiceError::Store(e)
        }
    }
}

impl From<Vec<FieldError>> for ServiceError {
    fn from(errors: Vec<FieldError>) -> Self {
        ServiceError::Validation(errors)
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_error_keeps_its_cause_chain() {
        let cause = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the pipe broke");
        let e = ServiceError::internal(cause, "writing a recording");
        assert_eq!(e.to_string(), "internal error: writing a recording: the pipe broke");
        let ServiceError::Internal(inner) = e else { panic!("not internal") };
        let io = inner.chain().find_map(|c| c.downcast_ref::<std::io::Error>()).expect("the io error is in the chain");
        assert_eq!(io.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
