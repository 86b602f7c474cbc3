//! Every failure the API reports: an HTTP status and a stable code, mapped in one place.
//! Internal faults answer a generic message; their detail goes to the log, never to the
//! client (it could name host paths).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use forge_image::ImageError;
use forge_sandbox::SandboxError;
use forge_sandbox::proto::ErrorKind;
use forge_store::StoreError;

use crate::wire::ErrorBody;

/// Stable error codes, as ForgeVM names them (plus `TOO_LARGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    BadRequest,
    Unauthorized,
    NotFound,
    MethodNotAllowed,
    Conflict,
    TooLarge,
    Unavailable,
    Internal,
    /// The gateway's policy denied a tool call.
    PolicyDenied,
    /// The gateway's policy wants a person to approve a tool call first.
    ApprovalRequired,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "BAD_REQUEST",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::NotFound => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::Conflict => "CONFLICT",
            Self::TooLarge => "TOO_LARGE",
            Self::Unavailable => "UNAVAILABLE",
            Self::Internal => "INTERNAL_ERROR",
            Self::PolicyDenied => "POLICY_DENIED",
            Self::ApprovalRequired => "APPROVAL_REQUIRED",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            // A call that waits for approval conflicts with the policy's state, as a
            // duplicate does with the store's.
            Self::Conflict | Self::ApprovalRequired => StatusCode::CONFLICT,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::PolicyDenied => StatusCode::FORBIDDEN,
        }
    }
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Code::BadRequest, message)
    }

    /// A field of the request that cannot be used.
    pub fn field(field: &str, reason: impl std::fmt::Display) -> Self {
        Self::bad_request(format!("invalid {field}: {reason}"))
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }

    /// An internal fault: logged in full, answered generically.
    pub fn internal(context: &str, err: &dyn std::error::Error) -> Self {
        tracing::error!(error = %chain(err), "{context}");
        Self::new(
            Code::Internal,
            format!("internal error while trying to {context}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.as_str().to_owned(),
            message: self.message,
        };
        (self.code.status(), Json(body)).into_response()
    }
}

impl From<SandboxError> for ApiError {
    fn from(err: SandboxError) -> Self {
        if let SandboxError::Image(image) = err {
            // A missing image is the request's fault here, not a missing resource: ForgeVM's
            // SDK reads every 404 as "sandbox not found".
            return match image {
                ImageError::NotFound { .. } => Self::bad_request(image.to_string()),
                other => other.into(),
            };
        }
        match &err {
            SandboxError::InvalidSpec(spec) => Self::field(spec.field, &spec.reason),
            // An image this host cannot get is for the client to fix (import it, use
            // another), not to retry.
            SandboxError::Unsupported { .. }
            | SandboxError::ImageUnavailable { .. }
            | SandboxError::SetupCommand { .. } => Self::bad_request(err.to_string()),
            SandboxError::NotFound { id } => {
                Self::not_found(format!("sandbox {:?} not found", id.as_str()))
            }
            SandboxError::Gone { .. } => Self::not_found(err.to_string()),
            SandboxError::Operation { source, .. } => {
                let code = match source.kind {
                    // A missing file is not a missing sandbox: ForgeVM's SDK turns every 404
                    // into SandboxNotFound, so file errors stay out of 404.
                    ErrorKind::NotFound
                    | ErrorKind::AlreadyExists
                    | ErrorKind::PermissionDenied
                    | ErrorKind::NotADirectory
                    | ErrorKind::IsADirectory
                    | ErrorKind::DirectoryNotEmpty
                    | ErrorKind::InvalidInput
                    | ErrorKind::NoSuchProcess
                    | ErrorKind::Unsupported => Code::BadRequest,
                    ErrorKind::Protocol | ErrorKind::Other => Code::Internal,
                };
                if code == Code::Internal {
                    return Self::internal("complete the operation in the sandbox", &err);
                }
                Self::new(code, source.message.clone())
            }
            SandboxError::Capacity { .. } => Self::new(Code::Unavailable, err.to_string()),
            SandboxError::Setup { .. }
            | SandboxError::Host { .. }
            | SandboxError::Protocol { .. }
            | SandboxError::Teardown { .. } => Self::internal("operate the sandbox", &err),
            SandboxError::Image(_) => unreachable!("handled above"),
        }
    }
}

impl From<ImageError> for ApiError {
    fn from(err: ImageError) -> Self {
        match &err {
            ImageError::NotFound { .. } => Self::not_found(err.to_string()),
            ImageError::InUse { .. } => Self::new(Code::Conflict, err.to_string()),
            ImageError::Unreachable { .. } => Self::new(Code::Unavailable, err.to_string()),
            ImageError::InvalidReference { .. }
            | ImageError::Registry { .. }
            | ImageError::DigestMismatch { .. }
            | ImageError::NoPlatform { .. }
            | ImageError::Unsupported { .. }
            | ImageError::Archive { .. }
            | ImageError::Layer { .. }
            | ImageError::Build { .. } => Self::bad_request(err.to_string()),
            ImageError::Io { .. } | ImageError::Index { .. } => {
                Self::internal("use the image store", &err)
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match &err {
            StoreError::Conflict { what, key } => {
                Self::new(Code::Conflict, format!("{what} {key:?} already exists"))
            }
            StoreError::Open { .. }
            | StoreError::Migrate(_)
            | StoreError::Query { .. }
            | StoreError::Decode { .. } => Self::internal("use the state store", &err),
        }
    }
}

impl From<forge_gateway::GatewayError> for ApiError {
    fn from(err: forge_gateway::GatewayError) -> Self {
        use forge_gateway::GatewayError;
        match err {
            GatewayError::SessionNotFound { .. } | GatewayError::SessionClosed { .. } => {
                Self::not_found(err.to_string())
            }
            GatewayError::Policy(source) => Self::bad_request(format!("invalid policy: {source}")),
            GatewayError::Sandbox { source, .. } => source.into(),
            GatewayError::Store(source) => source.into(),
            GatewayError::Ledger { .. } | GatewayError::DataDir { .. } => {
                Self::internal("record the tool call", &err)
            }
        }
    }
}

/// An error and its causes on one line.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
