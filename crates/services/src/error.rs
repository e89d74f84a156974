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
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ServiceError {
    pub fn not_found(kind: &'static str, id: impl ToString) -> Self {
        ServiceError::NotFound { kind, id: id.to_string() }
    }
}

impl From<Vec<FieldError>> for ServiceError {
    fn from(errors: Vec<FieldError>) -> Self {
        ServiceError::Validation(errors)
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;
