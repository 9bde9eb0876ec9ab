//! S3's errors: a [`Code`] (S3's own names, which clients switch on), its HTTP status, and
//! the XML body S3 answers with (`<Error><Code>…</Code><Message>…</Message>…</Error>`).

use std::fmt;

use crate::text::escape;

/// The error codes ecdn answers with, named as S3 names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    AccessDenied,
    AuthorizationHeaderMalformed,
    AuthorizationQueryParametersError,
    BadDigest,
    BucketAlreadyOwnedByYou,
    EntityTooLarge,
    EntityTooSmall,
    IncompleteBody,
    InternalError,
    InvalidAccessKeyId,
    InvalidArgument,
    InvalidBucketName,
    InvalidDigest,
    InvalidPart,
    InvalidPartOrder,
    InvalidRange,
    InvalidRequest,
    KeyTooLongError,
    MalformedXML,
    MethodNotAllowed,
    MissingContentLength,
    NoSuchBucket,
    NoSuchKey,
    NoSuchUpload,
    NotImplemented,
    PreconditionFailed,
    RequestTimeTooSkewed,
    ServiceUnavailable,
    SignatureDoesNotMatch,
    XAmzContentSHA256Mismatch,
}

impl Code {
    /// The HTTP status S3 answers this code with.
    pub fn status(self) -> u16 {
        use Code::*;
        match self {
            AccessDenied | InvalidAccessKeyId | RequestTimeTooSkewed | SignatureDoesNotMatch => 403,
            NoSuchBucket | NoSuchKey | NoSuchUpload => 404,
            MethodNotAllowed => 405,
            BucketAlreadyOwnedByYou => 409,
            MissingContentLength => 411,
            PreconditionFailed => 412,
            InvalidRange => 416,
            InternalError => 500,
            NotImplemented => 501,
            ServiceUnavailable => 503,
            AuthorizationHeaderMalformed
            | AuthorizationQueryParametersError
            | BadDigest
            | EntityTooLarge
            | EntityTooSmall
            | IncompleteBody
            | InvalidArgument
            | InvalidBucketName
            | InvalidDigest
            | InvalidPart
            | InvalidPartOrder
            | InvalidRequest
            | KeyTooLongError
            | MalformedXML
            | XAmzContentSHA256Mismatch => 400,
        }
    }

    pub fn as_str(self) -> &'static str {
        use Code::*;
        match self {
            AccessDenied => "AccessDenied",
            AuthorizationHeaderMalformed => "AuthorizationHeaderMalformed",
            AuthorizationQueryParametersError => "AuthorizationQueryParametersError",
            BadDigest => "BadDigest",
            BucketAlreadyOwnedByYou => "BucketAlreadyOwnedByYou",
            EntityTooLarge => "EntityTooLarge",
            EntityTooSmall => "EntityTooSmall",
            IncompleteBody => "IncompleteBody",
            InternalError => "InternalError",
            InvalidAccessKeyId => "InvalidAccessKeyId",
            InvalidArgument => "InvalidArgument",
            InvalidBucketName => "InvalidBucketName",
            InvalidDigest => "InvalidDigest",
            InvalidPart => "InvalidPart",
            InvalidPartOrder => "InvalidPartOrder",
            InvalidRange => "InvalidRange",
            InvalidRequest => "InvalidRequest",
            KeyTooLongError => "KeyTooLongError",
            MalformedXML => "MalformedXML",
            MethodNotAllowed => "MethodNotAllowed",
            MissingContentLength => "MissingContentLength",
            NoSuchBucket => "NoSuchBucket",
            NoSuchKey => "NoSuchKey",
            NoSuchUpload => "NoSuchUpload",
            NotImplemented => "NotImplemented",
            PreconditionFailed => "PreconditionFailed",
            RequestTimeTooSkewed => "RequestTimeTooSkewed",
            ServiceUnavailable => "ServiceUnavailable",
            SignatureDoesNotMatch => "SignatureDoesNotMatch",
            XAmzContentSHA256Mismatch => "XAmzContentSHA256Mismatch",
        }
    }
}

/// An S3 error: its code and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Error {
    pub code: Code,
    pub message: String,
}

impl S3Error {
    pub fn new(code: Code, message: impl Into<String>) -> S3Error {
        S3Error {
            code,
            message: message.into(),
        }
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// The XML body S3 answers it with; `resource`: the path the request named, and
    /// `request_id`: the id the answer carries (`x-amz-request-id`).
    pub fn xml(&self, resource: &str, request_id: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message>\
             <Resource>{}</Resource><RequestId>{}</RequestId></Error>",
            self.code.as_str(),
            escape(&self.message),
            escape(resource),
            escape(request_id)
        )
    }
}

impl fmt::Display for S3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for S3Error {}
