//! What the second round's attacks share: API calls made as a user (bearer tokens), users and
//! grants, and raw HTTP posts to the XXL-JOB listener.

use std::net::SocketAddr;
use std::time::Duration;

use tonic::Request;
use tonic::transport::Channel;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

/// `message` with `authorization: Bearer token` (none without a token).
pub fn authed<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token
        && let Ok(value) = format!("Bearer {token}").parse()
    {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Creates a user (as `admin`, or open while there is none); returns its id and token.
pub async fn create_user(
    client: &mut JobAdminClient<Channel>,
    admin: Option<&str>,
    name: &str,
    role: &str,
) -> anyhow::Result<(i64, String)> {
    let request = pb::CreateUserRequest {
        name: name.to_string(),
        role: role.to_string(),
        ..Default::default()
    };
    let created = client
        .create_user(authed(request, admin))
        .await?
        .into_inner();
    let user = created.user.ok_or_else(|| anyhow::anyhow!("no user"))?;
    Ok((user.id, created.token))
}

pub async fn grant(
    client: &mut JobAdminClient<Channel>,
    admin: &str,
    user_id: i64,
    group_id: i64,
) -> anyhow::Result<()> {
    let request = pb::GrantGroupRequest { user_id, group_id };
    client.grant_group(authed(request, Some(admin))).await?;
    Ok(())
}

/// A group made while the admin runs open, with an access token (empty: none).
pub async fn create_group(
    client: &mut JobAdminClient<Channel>,
    app_name: &str,
    access_token: &str,
) -> anyhow::Result<i64> {
    let group = pb::Group {
        app_name: app_name.to_string(),
        title: app_name.to_string(),
        address_type: pb::AddressType::Auto as i32,
        access_token: access_token.to_string(),
        ..Default::default()
    };
    let request = pb::CreateGroupRequest { group: Some(group) };
    let created = client.create_group(request).await?.into_inner();
    Ok(created.group.map_or(0, |group| group.id))
}

/// A raw HTTP/1.1 POST to `address` with `headers` (name, value); returns the whole answer.
/// Async: the admin under test runs on the same runtime.
pub async fn post(
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!("POST {path} HTTP/1.1\r\nHost: {address}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        anyhow::Ok(answer)
    };
    tokio::time::timeout(Duration::from_secs(10), exchange).await?
}

/// Whether an XXL-JOB answer says success (`"code":200` in its JSON).
pub fn xxl_ok(answer: &str) -> bool {
    answer.contains("\"code\":200")
}
