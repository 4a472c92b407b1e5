//! Callers with bearer tokens, and the list of every RPC the contract defines, for the suites
//! that check who may call what.

use prost::Message;
use tonic::{metadata::MetadataValue, service::Interceptor, Request, Status};

/// Presents a bearer token (or none) on every call of the client it intercepts.
#[derive(Clone, Debug)]
pub struct Bearer(pub Option<&'static str>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = self.0 {
            let value: MetadataValue<_> = format!("Bearer {token}")
                .parse()
                .map_err(|_| Status::invalid_argument("token is not a header value"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// Every RPC of every service of the contract, as `package.Service/Method`, read from the
/// descriptor set the servers serve for reflection: an RPC added to a `.proto` file appears here
/// without any change to the tests.
pub fn contract_rpcs() -> Vec<String> {
    let set = prost_types::FileDescriptorSet::decode(adk_proto::FILE_DESCRIPTOR_SET)
        .expect("the compiled descriptor set decodes");
    let mut rpcs = Vec::new();
    for file in &set.file {
        for service in &file.service {
            for method in &service.method {
                rpcs.push(format!(
                    "{}.{}/{}",
                    file.package(),
                    service.name(),
                    method.name()
                ));
            }
        }
    }
    rpcs.sort();
    rpcs
}
