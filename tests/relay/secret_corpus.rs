//! The secret scanner against a labelled corpus: generated secrets of every
//! kind, which must all be refused, and harmless look-alikes, which must all
//! pass. Run with `cargo test secret_corpus -- --nocapture` for the figures.

use crate::support::{post, spawn_app};
use crosstalk::relay::secrets::{find_secret, kinds};
use serde_json::json;
use std::path::{Path, PathBuf};

/// A small deterministic generator, so the corpus is the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn from(&mut self, alphabet: &str, n: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..n)
            .map(|_| chars[(self.next() % chars.len() as u64) as usize])
            .collect()
    }

    /// Expands `{X9}` placeholders: A base62, B base64url, H lowercase hex,
    /// U uppercase and digits, L letters, D digits, Z base32 lowercase.
    fn fill(&mut self, template: &str) -> String {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').expect("closed placeholder") + start;
            let spec = &rest[start + 1..end];
            let n: usize = spec[1..].parse().expect("a length");
            let alphabet = match &spec[..1] {
                "A" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "B" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                "H" => "0123456789abcdef",
                "U" => "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                "L" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                "D" => "0123456789",
                "Z" => "abcdefghijklmnopqrstuvwxyz234567",
                other => panic!("unknown placeholder {other}"),
            };
            // Keep generated tokens realistic: at least one digit and one letter.
            let mut value = self.from(alphabet, n);
            if n >= 8 && spec.starts_with(['A', 'B', 'H', 'U']) {
                value.replace_range(0..2, "a7");
                if spec.starts_with('U') {
                    value.replace_range(0..2, "A7");
                }
            }
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// How each kind looks in the wild.
const SECRETS: &[(&str, &[&str])] = &[
    (
        "a crosstalk token",
        &[
            "xtalk_{Z52}",
            "XTALK_{Z52}",
            "xtalk_{Z52}x",
            "\"xtalk_{Z26}\" + \"{Z26}\"",
            "xtalk_{Z20}\n{Z32}",
        ],
    ),
    (
        "a private key",
        &[
            "-----BEGIN RSA PRIVATE KEY-----\nMII{B60}",
            "-----BEGIN EC PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "-----BEGIN DSA PRIVATE KEY-----",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
            "PuTTY-User-Key-File-3: ssh-ed25519",
        ],
    ),
    ("an AWS access key id", &["AKIA{U16}", "ASIA{U16}"]),
    (
        "an AWS secret access key",
        &[
            "aws_secret_access_key = {A40}",
            "AWS_SECRET_ACCESS_KEY: \"{A40}\"",
            "\"SecretAccessKey\": \"{A40}\"",
        ],
    ),
    ("a Google API key", &["AIza{B35}"]),
    ("a Google OAuth client secret", &["GOCSPX-{B28}"]),
    (
        "an Azure storage account key",
        &["AccountName=prod;AccountKey={A86}==;EndpointSuffix=core.windows.net"],
    ),
    ("a DigitalOcean token", &["dop_v1_{H64}", "doo_v1_{H64}"]),
    ("a HashiCorp Vault token", &["hvs.{B90}", "hvb.{B120}"]),
    (
        "a GitHub token",
        &[
            "ghp_{A36}",
            "gho_{A36}",
            "ghs_{A36}",
            "ghu_{A36}",
            "ghr_{A36}",
            "github_pat_{A22}_{A59}",
        ],
    ),
    (
        "a GitLab token",
        &["glpat-{B20}", "gldt-{B20}", "glrt-{B20}"],
    ),
    ("an Atlassian API token", &["ATATT3xFfGF0{B180}"]),
    (
        "a Slack token",
        &[
            "xoxb-{D12}-{D12}-{A24}",
            "xoxp-{D12}-{D12}-{D12}-{H32}",
            "xapp-1-{U11}-{D13}-{H64}",
        ],
    ),
    (
        "a Slack webhook URL",
        &["https://hooks.slack.com/services/T{U8}/B{U10}/{A24}"],
    ),
    (
        "a Discord webhook URL",
        &[
            "https://discord.com/api/webhooks/{D18}/{B68}",
            "https://discordapp.com/api/webhooks/{D18}/{B68}",
        ],
    ),
    (
        "a Microsoft Teams webhook URL",
        &["https://acme.webhook.office.com/webhookb2/{H32}@{H32}/IncomingWebhook/{H32}/{H32}"],
    ),
    ("a Telegram bot token", &["{D9}:AA{B33}"]),
    (
        "a Stripe key",
        &["sk_live_{A24}", "rk_live_{A24}", "whsec_{A32}"],
    ),
    ("a Square token", &["sq0csp-{B43}", "sq0atp-{B22}"]),
    ("a Shopify token", &["shpat_{H32}", "shpss_{H32}"]),
    ("a SendGrid API key", &["SG.{B22}.{B43}"]),
    ("a Twilio API key", &["SK{H32}"]),
    (
        "an Anthropic API key",
        &["sk-ant-api03-{B93}AA", "sk-ant-admin01-{B93}AA"],
    ),
    (
        "an OpenAI API key",
        &["sk-proj-{B156}", "sk-svcacct-{B156}", "sk-{A48}"],
    ),
    ("a Hugging Face token", &["hf_{L34}"]),
    ("a Groq API key", &["gsk_{A52}"]),
    ("a Replicate token", &["r8_{A37}"]),
    ("an npm token", &["npm_{A36}"]),
    ("a PyPI token", &["pypi-AgEIcHlwaS5vcmc{B70}"]),
    ("a RubyGems key", &["rubygems_{H48}"]),
    ("a crates.io token", &["cio{A32}"]),
    ("a Docker Hub token", &["dckr_pat_{B27}"]),
    ("a NuGet key", &["oy2{Z43}"]),
    (
        "a JSON Web Token",
        &["eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{B60}.{B43}"],
    ),
    (
        "a URL with a password",
        &[
            "postgres://app:{A16}@db.internal:5432/app",
            "mongodb+srv://admin:{A12}@cluster0.mongodb.net/test",
            "https://deploy:{A20}@git.acme.dev/repo.git",
            "redis://:{A24}@cache:6379/0",
        ],
    ),
    (
        "an npm registry token",
        &["//registry.npmjs.org/:_authToken={A36}", "_auth={B44}"],
    ),
    (
        "an Azure shared access key",
        &[
            "Endpoint=sb://prod.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={A43}=",
            "SharedAccessSignature={A44}",
        ],
    ),
    (
        "a bearer token",
        &[
            "Authorization: Bearer {B40}",
            "curl -H 'authorization: bearer {A32}' https://api.internal",
        ],
    ),
    (
        "a user and password",
        &[
            "curl -u deploy:{A12} https://ci.internal/api",
            "curl --user=ci:{A16} -X POST https://ci.internal/build",
        ],
    ),
    (
        "a key assignment",
        &[
            "SESSION_KEY={A40}",
            "ENCRYPTION_KEY={H64}",
            "SIGNING_KEY: \"{B43}\"",
            "pub const SIGNING_KEY: &str = \"{B43}\";",
        ],
    ),
    (
        "a password assignment",
        &[
            "PGPASSWORD={A12} psql -h db app",
            "DB_PASS={A14}",
            "mysqldump --password={A12} app",
            "password={A16}",
            "DB_PASSWORD: \"{A14}\"",
            "api_key = '{A32}'",
            "\"client_secret\": \"{B40}\"",
            "secret_key => {A24}",
            "export AUTH_TOKEN={A30}",
            "Server=db;User Id=sa;Password={A12};",
            "curl -d 'user=ci&password={A12}' https://ci.internal/login",
            "db_password: {A10}?",
            // Secrets written into code, past a type annotation too.
            "auth_token = \"{A32}\"",
            "API_KEY: str = \"{A40}\"",
            "const API_TOKEN: &str = \"{A40}\";",
            "static SECRET: &'static str = \"{A32}\";",
            "client = OpenAI(api_key=\"{A48}\")",
            "    apiKey: '{B40}',",
        ],
    ),
];

/// Real code that names tokens, keys and passwords, which the scanner
/// once refused (issue 39 found the first six in site-packages and the
/// crates this project builds, the rest in the corpus below) or might: a
/// call, a subscript, a path, a type or a string that names a token is
/// code, not a secret.
const CODE_THAT_NAMES_A_TOKEN: &[&str] = &[
    "auth_token = b64decode(auth['authorizationToken']).decode()",
    "\"input_token\": \"pagination_token\",",
    "crv_key: t.Type[PrivateOKPKey] = PRIVATE_KEYS_MAP[crv]",
    "auth_token = b64encode(f\"AWS:{password}\".encode(\"ascii\")).decode()",
    "pub const IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN;",
    "pub const IFLA_VXLAN_LOCALBYPASS: _bindgen_ty_24 = _bindgen_ty_24::IFLA_VXLAN_LOCALBYPASS;",
    "const token = await getToken(req.headers['x-token'])",
    "  apiKey: process.env.API_KEY,",
    "password = os.environ[\"PASSWORD\"]",
    "let token = Token::from_str(&raw)?;",
    "CHALLENGE_PASSWORD = ObjectIdentifier(\"1.2.840.113549.1.9.7\")",
    "SECRET_KEY = os.urandom(24)",
    "sort_key: t.Callable[[t.Any], t.Any] | None = None,",
    "op_key = t.cast(t.Union[Ed25519PrivateKey, Ed448PrivateKey], key.get_op_key(\"sign\"))",
    "def sign(self, private_key: SSHCertPrivateKeyTypes) -> SSHCertificate:",
    "    private_key: PKCS7PrivateKeyTypes,",
    "api_key = ApiGatewayApiKey(",
    "ACCESS_KEY = 'aws_access_key_id'",
    "table_buckets, continuation_token = self.s3tables_backend.list_table_buckets(",
    "generate_private_key: x25519_generate_private_key,",
    "static THREAD_RNG_KEY: Rc<UnsafeCell<ReseedingRng<Core, OsRng>>> = {",
    "let raw_private_key: EcPrivateKeyBin<'_> = private_key",
    "return iv && (jwe.encrypted_key = b64u(encryptedKey)), encodedAad",
    "    encrypted_key: b64u(encryptedKey),",
    "\"arn:aws:secretsmanager:*:*:secret:AmazonSageMaker-*\"",
    "mhu = MultiHostUrl('https://foo.com:123,foo:bar@bar.com/path')",
    "client_secret: \"client-secret-value\".to_string(),",
    " *     secret: 'it-is-very-secret',",
    "NOPASSWORD = \"no-password-required\"",
    "\"access_token\": \"access-1\",",
    "user = User(username='scolvin', password='password1')",
    "check_body(b\"username=user&password=secure%20password\").await;",
    "\"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n\\",
    "\"X-aws-ec2-metadata-token\":\n            result = \"fake-imdsv2-token\"",
    "token = f\"Bearer {access_token}\"",
    "password = \"{}:{}\".format(user, password)",
];

#[test]
fn scanner_refused_real_code_that_names_a_token() {
    let refused: Vec<String> = CODE_THAT_NAMES_A_TOKEN
        .iter()
        .filter_map(|code| find_secret(code).map(|kind| format!("{code:?} as {kind}")))
        .collect();
    assert!(refused.is_empty(), "refused code:\n{}", refused.join("\n"));
}

#[tokio::test]
async fn code_that_names_a_token_is_stored_over_http() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let body = CODE_THAT_NAMES_A_TOKEN[..6].join("\n");
    let (status, reply) = post(
        &app,
        "/api/channels/ops/messages",
        &alice,
        json!({ "body": body }),
    )
    .await;
    assert_eq!(status, 201, "{reply}");
    let stored = app.rest(&alice).stored().await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["body"], body);
}

/// Text that looks a little like a secret and is not one.
fn harmless(rng: &mut Rng) -> Vec<String> {
    let mut corpus: Vec<String> = [
        "password = os.environ[\"DB_PASSWORD\"]",
        "password: ${DB_PASSWORD}",
        "api_key = process.env.OPENAI_API_KEY",
        "let token = std::env::var(\"GITHUB_TOKEN\")?;",
        "secret: <redacted>",
        "password: ********",
        "client_secret = settings.CLIENT_SECRET",
        "token = self.token",
        "PASSWORD=changeme",
        "api_key: \"your-api-key-here\"",
        "password: {{ vault_db_password }}",
        "The password policy asks for 12 characters; reset yours from the admin page.",
        "Rotate the API key every 90 days and never paste it into chat.",
        "Where is the secret sauce? In src/render/shader.rs.",
        "I forgot my password again, can you reset it?",
        "The token bucket refills at 20 per second.",
        "postgres://app@db.internal:5432/app",
        "postgres://app:${DB_PASSWORD}@db.internal:5432/app",
        "https://user@example.com/path",
        "Visit https://example.com:8443/docs?page=2",
        "We use scikit-learn (sk-learn-compatible estimators) for it.",
        "task-list-for-the-upcoming-release-candidate-review",
        "AKIA is the prefix AWS uses for access key ids.",
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYj0ks3e4GZ8bpUd3R5bWFkZXRlc3RrZXk user@host",
        "hf_hub_download(repo_id=\"gpt2\")",
        "npm_config_registry is read by npm",
        "ghp_ marks a classic GitHub token",
        "eyJ is what base64 JSON starts with",
        "version = \"1.4.0\"; key = \"release\"",
        "See RFC 7519 for JWTs.",
        "The SK prefix is Twilio's.",
        "Run `vault kv get secret/db` for the password.",
        "struct Args { token: Option<String> }",
        "fn f(token: &Token) -> Result<()>",
        "api_key: Optional[str] = None",
        "password: SecretStr",
        "Token: expired",
        "password: incorrect",
        "pub colon_token: Token![:],",
        "next_token = self._get_param(\"NextToken\")",
        "let url = Url::parse(\"https://user:password@example.com/tmp/foo\")?;",
        "Authorization: Bearer $TOKEN",
        "Authorization: Bearer <your token>",
        "the xtalk_ prefix marks crosstalk tokens so scanners can spot them",
        "_authToken=${NPM_TOKEN}",
        "SharedAccessKeyName=RootManageSharedAccessKey",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for _ in 0..25 {
        corpus.push(format!("fixed in commit {}", rng.fill("{H40}")));
        corpus.push(format!(
            "request id {}-{}-4{}-a{}-{}",
            rng.fill("{H8}"),
            rng.fill("{H4}"),
            rng.fill("{H3}"),
            rng.fill("{H3}"),
            rng.fill("{H12}")
        ));
        corpus.push(format!("sha256:{}", rng.fill("{H64}")));
        corpus.push(format!("\"integrity\": \"sha512-{}==\"", rng.fill("{A86}")));
        corpus.push(format!(
            "image digest sha1:{} and build {}",
            rng.fill("{H40}"),
            rng.fill("{D10}")
        ));
    }
    corpus
}

/// Careless pastes of real configuration, each with freshly generated
/// values: what people put in a chat when they are in a hurry.
fn config_pastes(rng: &mut Rng) -> Vec<(&'static str, String)> {
    use base64::{Engine, engine::general_purpose::STANDARD};
    let mut bytes = |n: usize| (0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>();
    let pem = |label: &str, bytes: &mut dyn FnMut(usize) -> Vec<u8>| {
        let body = STANDARD.encode(bytes(600));
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|l| std::str::from_utf8(l).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    };
    let cert = STANDARD.encode(pem("CERTIFICATE", &mut bytes));
    let rsa = STANDARD.encode(pem("RSA PRIVATE KEY", &mut bytes));
    let ec = STANDARD.encode(pem("EC PRIVATE KEY", &mut bytes));
    let pkcs8 = STANDARD.encode(pem("PRIVATE KEY", &mut bytes));
    // A key's DER body: the fixed bytes that open each kind, then random.
    let mut der = |head: &[u8]| {
        let mut der = head.to_vec();
        der.extend(bytes(180));
        STANDARD.encode(der)
    };
    let rsa_pkcs8 = der(&[
        0x30, 0x82, 0x04, 0xbd, 0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86,
        0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00, 0x04, 0x82, 0x04, 0xa7,
    ]);
    let rsa_pkcs1 = der(&[
        0x30, 0x82, 0x04, 0xa3, 0x02, 0x01, 0x00, 0x02, 0x82, 0x01, 0x01, 0x00,
    ]);
    let ec_sec1 = der(&[0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20]);
    let ed25519 = der(&[
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ]);
    let app_key = STANDARD.encode(bytes(32));
    let mut fill = |template: &str| rng.fill(template);
    let basic = |user: &str, password: &str| STANDARD.encode(format!("{user}:{password}"));
    let kubeconfig = |user_data: &str| {
        format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {cert}\n    \
             server: https://127.0.0.1:6443\n  name: kind-dev\nusers:\n- name: kind-dev\n  user:\n{user_data}"
        )
    };
    let mut pastes = vec![
        (
            "a private key",
            kubeconfig(&format!(
                "    client-certificate-data: {cert}\n    client-key-data: {rsa}\n"
            )),
        ),
        (
            "a private key",
            kubeconfig(&format!("    client-key-data: {ec}\n")),
        ),
        (
            "a private key",
            format!(
                "{{\"users\":[{{\"name\":\"admin\",\"user\":{{\"client-key-data\":\"{pkcs8}\"}}}}]}}"
            ),
        ),
    ];
    // Unquoted `.env` values with each symbol a generator puts in.
    for symbol in ['!', '&', '*', '(', ')', '[', ']', '{', '}', '|'] {
        pastes.push((
            "a password assignment",
            format!(
                "DB_HOST=db.internal\nDB_USER=app\nDB_PASSWORD={}{symbol}{}\nDB_NAME=app",
                fill("{A5}"),
                fill("{A6}")
            ),
        ));
    }
    let password = |fill: &mut dyn FnMut(&str) -> String| {
        format!("{}!{}&{}", fill("{A4}"), fill("{A4}"), fill("{A3}"))
    };
    let (p1, p2, p3, p4) = (
        password(&mut fill),
        password(&mut fill),
        password(&mut fill),
        password(&mut fill),
    );
    let (p5, p6, p7) = (
        password(&mut fill),
        password(&mut fill),
        password(&mut fill),
    );
    pastes.extend([
        (
            "a password assignment",
            format!("services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: {p1}\n"),
        ),
        (
            "a password assignment",
            format!("    environment:\n      - MYSQL_ROOT_PASSWORD={}*{}\n", fill("{A6}"), fill("{A5}")),
        ),
        (
            "a password assignment",
            format!(
                "\"ConnectionStrings\": {{\n  \"DefaultConnection\": \"Server=tcp:acme.database.windows.net,1433;\
                 Database=app;User ID=app;Password={p2};Encrypt=True;\"\n}}"
            ),
        ),
        (
            "a password assignment",
            format!("Data Source=db01;Initial Catalog=Orders;User Id=sa;Password={p3};"),
        ),
        (
            "a password assignment",
            format!("ConnectionStrings__Default=Host=db;Username=app;Password={p4};"),
        ),
        ("a password assignment", format!("spring.datasource.url=jdbc:postgresql://db/app\nspring.datasource.password={p5}")),
        ("a password assignment", format!("redis:\n  host: cache\n  password: {p6}\n")),
        ("a key assignment", format!("SESSION_KEY={}", fill("{A40}"))),
        ("a key assignment", format!("ENCRYPTION_KEY={}", fill("{H64}"))),
        ("a key assignment", format!("export MASTER_KEY={}", fill("{H32}"))),
        ("a key assignment", format!("JWT_SIGNING_KEY=\"{}\"", fill("{A48}"))),
        ("a key assignment", format!("APP_KEY=base64:{app_key}")),
        (
            "a key assignment",
            format!("APP_NAME=Shop\nAPP_ENV=production\nAPP_KEY=base64:{}\nAPP_DEBUG=false", STANDARD.encode(fill("{A32}"))),
        ),
        (
            "a user and password",
            format!("curl -H \"Authorization: Basic {}\" https://ci.internal/api/json", basic("deploy", &fill("{A14}"))),
        ),
        (
            "a user and password",
            format!("GET /api/v1/builds HTTP/1.1\nHost: ci.internal\nAuthorization: Basic {}\nAccept: */*", basic("svc-build", &p7)),
        ),
        (
            "a user and password",
            format!("curl -u deploy:{} https://nexus.internal/repository/releases/", fill("{A12}")),
        ),
        (
            "a user and password",
            format!("curl --user \"ci-bot:{}!{}\" -X POST https://jenkins.internal/job/deploy/build", fill("{A6}"), fill("{A6}")),
        ),
        (
            "a user and password",
            format!("curl -fsS -u 'svc_build:{}' https://artifacts.internal/upload", fill("{A14}")),
        ),
        (
            "a password assignment",
            format!("curl https://acme.openai.azure.com/openai/deployments/gpt/chat -H \"api-key: {}\"", fill("{H32}")),
        ),
        (
            "a password assignment",
            format!("POST /v1/events HTTP/1.1\nHost: api.vendor.io\nX-API-Key: {}\n", fill("{A32}")),
        ),
        (
            "a password assignment",
            format!("curl -H 'x-api-key: {}' https://api.vendor.io/v2/items", fill("{B40}")),
        ),
        (
            "a user and password",
            format!(
                "{{\n  \"auths\": {{\n    \"registry.acme.io\": {{\n      \"auth\": \"{}\"\n    }}\n  }}\n}}",
                basic("robot$ci", &fill("{A20}"))
            ),
        ),
        (
            "a user and password",
            format!(
                "{{\"auths\":{{\"https://index.docker.io/v1/\":{{\"auth\":\"{}\",\"email\":\"ops@acme.io\"}}}}}}",
                basic("acmeops", &fill("{A16}"))
            ),
        ),
        ("a private key", rsa_pkcs8),
        ("a private key", rsa_pkcs1),
        ("a private key", ec_sec1),
        ("a private key", ed25519),
        ("a GitLab token", format!("GITLAB_TOKEN is glpat-{}", fill("{L20}"))),
        ("an npm token", format!("//registry.npmjs.org/ uses npm_{}", fill("{L36}"))),
        ("a HashiCorp Vault token", format!("VAULT_TOKEN is hvs.{}", fill("{L28}"))),
    ]);
    pastes
}

/// What the scanner once refused and must not: values that are numbers,
/// identifiers, paths or names of things, and encoded text that is no
/// credential.
fn harmless_config() -> Vec<String> {
    use base64::{Engine, engine::general_purpose::STANDARD};
    let cert = STANDARD
        .encode("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n");
    [
        "SERVER_AUTH = '1.3.6.1.5.5.7.3.1'".to_owned(),
        "pub const IFLA_INET6_TOKEN: u32 = 7;\nIFLA_INET6_TOKEN = _bindgen_ty_7::IFLA_INET6_TOKEN".to_owned(),
        "\"AWS::ApiGateway::ApiKey\": \"48205d4ffd7feba3\"".to_owned(),
        format!("clusters:\n- cluster:\n    certificate-authority-data: {cert}\n    server: https://10.0.0.1:6443"),
        "docker run --rm -u 1000:1000 -v $PWD:/src app".to_owned(),
        "sudo -u postgres:postgres psql".to_owned(),
        "sort_key: \"created_at\"".to_owned(),
        "cache_key = \"v2_users_by_team\"".to_owned(),
        "idempotency_key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\"".to_owned(),
        "private_key = \"/etc/ssl/private/server.key\"".to_owned(),
        "password: \"auth.password.reset_link\"".to_owned(),
        "Authorization: Basic dXNlcjpwYXNzd29yZA==".to_owned(),
        "\"auth\": \"dXNlcm5hbWU6cGFzc3dvcmQ=\"".to_owned(),
        "PUBLIC_KEY=MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE".to_owned(),
        "password = derive_key(seed, salt, 100_000)".to_owned(),
        "let token = md5(input);".to_owned(),
        "DB_PASSWORD=$(cat /run/secrets/db_password)".to_owned(),
        "TOKEN_FILE=/var/run/secrets/kubernetes.io/serviceaccount/token".to_owned(),
        "const auth = createTokenAuth(\"ghp_PersonalAccessToken01245678900000000\");".to_owned(),
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX".to_owned(),
    ]
    .into()
}

#[test]
fn secret_corpus_careless_config_pastes_are_refused() {
    let mut rng = Rng(0x0c0f_f1e5_7a57_e5ed);
    let pastes = config_pastes(&mut rng);
    let missed: Vec<String> = pastes
        .iter()
        .filter(|(kind, paste)| find_secret(paste) != Some(kind))
        .map(|(kind, paste)| format!("{kind}: {paste:?} -> {:?}", find_secret(paste)))
        .collect();
    let harmless = harmless_config();
    let refused: Vec<String> = harmless
        .iter()
        .filter_map(|text| find_secret(text).map(|kind| format!("{text:?} as {kind}")))
        .collect();
    println!(
        "config pastes refused: {} of {}; harmless refused: {} of {}",
        pastes.len() - missed.len(),
        pastes.len(),
        refused.len(),
        harmless.len()
    );
    assert!(
        missed.is_empty(),
        "stored or misnamed:\n{}",
        missed.join("\n")
    );
    assert!(pastes.len() >= 42, "the issue's 42 shapes, at least");
    assert!(
        refused.is_empty(),
        "refused harmless text:\n{}",
        refused.join("\n")
    );
}

#[test]
fn secret_corpus_every_kind_caught_and_no_harmless_sample_refused() {
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let listed: Vec<&str> = kinds().collect();
    for kind in &listed {
        assert!(
            SECRETS.iter().any(|(k, _)| k == kind),
            "the corpus has no samples of {kind}"
        );
    }
    println!("{:<34} {:>7}", "kind", "caught");
    let mut missed = Vec::new();
    for (kind, templates) in SECRETS {
        let mut caught = 0;
        let mut total = 0;
        for template in templates.iter().cycle().take(templates.len().max(20)) {
            let secret = rng.fill(template);
            let message = format!("Here is what you asked for: {secret} (let me know if it works)");
            total += 1;
            match find_secret(&message) {
                Some(found) if found == *kind => caught += 1,
                other => missed.push(format!("{kind}: {secret} -> {other:?}")),
            }
        }
        println!("{kind:<34} {caught:>3}/{total:<3}");
    }
    let harmless = harmless(&mut rng);
    let refused: Vec<_> = harmless
        .iter()
        .filter_map(|text| find_secret(text).map(|kind| format!("{text:?} as {kind}")))
        .collect();
    println!(
        "harmless samples refused: {} of {}",
        refused.len(),
        harmless.len()
    );
    assert!(
        missed.is_empty(),
        "missed or misnamed:\n{}",
        missed.join("\n")
    );
    assert!(
        refused.is_empty(),
        "refused harmless text:\n{}",
        refused.join("\n")
    );
}

#[tokio::test]
async fn every_kind_is_refused_over_http_naming_the_kind() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let mut rng = Rng(7);
    for (kind, templates) in SECRETS {
        let secret = rng.fill(templates[0]);
        let (status, body) = post(
            &app,
            "/api/channels/ops/messages",
            &alice,
            json!({ "body": format!("try {secret}") }),
        )
        .await;
        assert_eq!(status, 422, "{kind}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(kind), "{kind}: {message}");
        assert!(
            !message.contains(&secret),
            "{kind}: the refusal repeats the secret"
        );
    }
    assert_eq!(app.rest(&alice).stored_messages().await, 0);
}

/// One ecosystem's real source code and prose, with no secret in it: its
/// packages, and the kinds of file to read in each.
struct Ecosystem {
    name: &'static str,
    packages: Vec<PathBuf>,
    extensions: &'static [&'static str],
}

/// Every crate in the local cargo registry (every build downloads them).
/// With [`python_packages`] and [`npm_packages`], three ecosystems, so the
/// figure is not measured only on what the scanner was tuned on.
fn rust_crates() -> Ecosystem {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo")
        });
    let crates = listed(&home.join("registry").join("src"))
        .iter()
        .flat_map(|index| listed(index))
        .filter(|path| path.is_dir())
        .collect();
    Ecosystem {
        name: "Rust crates",
        packages: crates,
        extensions: &["rs", "md"],
    }
}

/// Python's standard library and every site-packages directory of the
/// `python3` on the path, and the client tests' virtual environment
/// (`tests/clients/.venv`): code from outside programs, so its test is
/// `#[ignore]`d, saying so.
fn python_packages() -> Ecosystem {
    const WHERE: &str = "import site, sysconfig\n\
        print(sysconfig.get_paths()['stdlib'])\n\
        for path in site.getsitepackages() + [site.getusersitepackages()]:\n    print(path)";
    let python = std::process::Command::new("python3")
        .args(["-c", WHERE])
        .output()
        .ok()
        .filter(|python| python.status.success())
        .expect("python3 runs");
    let printed = String::from_utf8(python.stdout).expect("paths in UTF-8");
    let mut lines = printed.lines().map(PathBuf::from);
    let stdlib = lines.next().expect("the standard library's path");
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/.venv/lib");
    let venv: Vec<PathBuf> = venv
        .read_dir()
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| python.path().join("site-packages"))
        .filter(|dir| dir.is_dir())
        .collect();
    assert!(
        !venv.is_empty(),
        "the client tests' Python packages are missing: python3 -m venv tests/clients/.venv \
         && tests/clients/.venv/bin/pip install -r tests/clients/requirements.txt (.ci/run does)"
    );
    let mut sites: Vec<PathBuf> = lines
        .chain(venv)
        .filter_map(|dir| dir.canonicalize().ok())
        .filter(|dir| dir.is_dir())
        .collect();
    sites.sort();
    sites.dedup();
    let module = |path: &PathBuf| {
        let name = path.file_name().unwrap().to_string_lossy();
        !name.ends_with("-packages")
            && !name.ends_with(".dist-info")
            && !name.ends_with(".egg-info")
            && name != "__pycache__"
            && (path.is_dir() || name.ends_with(".py"))
    };
    let packages = std::iter::once(stdlib)
        .chain(sites)
        .flat_map(|dir| listed(&dir))
        .filter(module)
        .collect();
    Ecosystem {
        name: "Python packages",
        packages,
        extensions: &["py"],
    }
}

/// The npm packages the client tests install (`tests/clients/node_modules`):
/// code from outside programs, so its test is `#[ignore]`d, saying so.
fn npm_packages() -> Ecosystem {
    let node_modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/node_modules");
    assert!(
        node_modules.is_dir(),
        "the npm packages are missing: npm ci --prefix tests/clients (.ci/run does)"
    );
    let packages = listed(&node_modules)
        .into_iter()
        .flat_map(
            |path| match path.file_name().unwrap().to_string_lossy().starts_with('@') {
                true => listed(&path),
                false => vec![path],
            },
        )
        .filter(|path| path.is_dir() && !path.ends_with(".bin"))
        .collect();
    Ecosystem {
        name: "npm packages",
        packages,
        extensions: &["js", "mjs", "cjs", "ts", "md", "json"],
    }
}

/// A directory's entries, sorted.
fn listed(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{} is readable: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    entries
}

/// The size of a chunk: a long message.
const CHUNK: usize = 8192;

/// Chunks scanned of each ecosystem: enough that one refusal in a thousand
/// is a figure (four are allowed), few enough that a debug build scans
/// them in seconds.
const SAMPLE: usize = 4_000;

/// What was read of an ecosystem.
struct Sample {
    /// Files of the kinds read, outside test fixtures.
    files: usize,
    /// Each chunk with the file it came from.
    chunks: Vec<(PathBuf, String)>,
}

/// An ecosystem's code as 8 KiB chunks drawn at random, seeded so that
/// every run reads the same ones: each package's files are cut into
/// chunks, those are shuffled, and the packages take turns giving one, so
/// that every package is read and none outweighs the rest. Only the
/// chunks drawn are read, each on its own. Test fixtures are left out: a
/// test key in a `tests/` folder is a real key's shape, and refusing it
/// would be right.
fn sample(ecosystem: &Ecosystem) -> Sample {
    let mut rng = Rng(0x5eed_c0de_ba5e_d00d);
    let mut files = 0;
    let shuffled: Vec<Vec<(PathBuf, u64)>> = ecosystem
        .packages
        .iter()
        .map(|package| {
            let found = files_of(package, ecosystem.extensions);
            files += found.len();
            let mut chunks: Vec<(PathBuf, u64)> = found
                .into_iter()
                .flat_map(|(file, len)| {
                    (0..len.div_ceil(CHUNK as u64)).map(move |number| (file.clone(), number))
                })
                .collect();
            for at in (1..chunks.len()).rev() {
                chunks.swap(at, (rng.next() % (at as u64 + 1)) as usize);
            }
            chunks
        })
        .collect();
    let rounds = shuffled.iter().map(Vec::len).max().unwrap_or(0);
    // Labelled by hand, not by the scanner: a chunk that holds a PEM private
    // key (the pem crate's and rcgen's sample keys) carries a secret, and
    // refusing it is right; it is no part of a corpus of harmless code.
    let chunks = (0..rounds)
        .flat_map(|round| shuffled.iter().filter_map(move |chunks| chunks.get(round)))
        .filter_map(|(file, number)| Some((file.clone(), read_chunk(file, *number)?)))
        .filter(|(_, chunk)| !chunk.contains("PRIVATE KEY-----"))
        .take(SAMPLE)
        .collect();
    Sample { files, chunks }
}

/// A package's files of the given kinds, with their sizes, outside test
/// fixtures (the package's own name counts: `tokio-test` is one), without
/// following links.
fn files_of(package: &Path, extensions: &[&str]) -> Vec<(PathBuf, u64)> {
    let fixture = |path: &Path| {
        path.components().any(|c| {
            let part = c.as_os_str().to_string_lossy().to_ascii_lowercase();
            [
                "tests",
                "test",
                "testdata",
                "test-data",
                "fixtures",
                "benches",
                "examples",
                "data",
                "node_modules",
            ]
            .contains(&part.as_str())
        }) || path.to_string_lossy().to_ascii_lowercase().contains("test")
    };
    let parent = package.parent().unwrap_or(package);
    let mut files = Vec::new();
    let mut stack = vec![package.to_path_buf()];
    while let Some(path) = stack.pop() {
        if fixture(path.strip_prefix(parent).unwrap_or(&path)) {
            continue;
        }
        let Ok(metadata) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if metadata.is_dir() {
            stack.extend(
                std::fs::read_dir(&path)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        } else if metadata.is_file()
            && path
                .extension()
                .is_some_and(|e| extensions.iter().any(|x| e == *x))
        {
            files.push((path, metadata.len()));
        }
    }
    files.sort();
    files
}

/// The `number`th 8 KiB of a file, from the first line that starts in it,
/// up to its last whole character; none when it is not text.
fn read_chunk(file: &Path, number: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut opened = std::fs::File::open(file).ok()?;
    opened.seek(SeekFrom::Start(number * CHUNK as u64)).ok()?;
    let mut bytes = Vec::with_capacity(CHUNK);
    opened.take(CHUNK as u64).read_to_end(&mut bytes).ok()?;
    if number > 0 {
        let line = bytes.iter().position(|b| *b == b'\n')?;
        bytes = bytes.split_off(line + 1);
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // Cut inside a character, at the end.
        Err(cut) if cut.utf8_error().error_len().is_none() => {
            let whole = cut.utf8_error().valid_up_to();
            let mut bytes = cut.into_bytes();
            bytes.truncate(whole);
            String::from_utf8(bytes).ok()?
        }
        Err(_) => return None,
    };
    (!text.is_empty()).then_some(text)
}

/// What in a refused chunk was refused: the first line refused on its own
/// (or two together), a window of it when it is long (minified code).
/// These are public packages' files, so what is printed is no secret.
fn refused_text(chunk: &str) -> String {
    let lines: Vec<&str> = chunk.lines().collect();
    let pairs = lines.windows(2).map(|pair| pair.join("\n"));
    let Some(line) = lines
        .iter()
        .map(|line| line.to_string())
        .chain(pairs)
        .find(|text| find_secret(text).is_some())
    else {
        return "(across lines)".to_owned();
    };
    let starts: Vec<usize> = line.char_indices().map(|(at, _)| at).collect();
    if starts.len() <= 240 {
        return line.trim().to_owned();
    }
    let window = |from: usize| {
        let end = starts.get(from + 240).copied().unwrap_or(line.len());
        &line[starts[from]..end]
    };
    (0..starts.len())
        .step_by(120)
        .map(window)
        .find(|text| find_secret(text).is_some())
        .map_or_else(|| format!("{}…", window(0)), |text| format!("…{text}…"))
}

#[test]
fn secret_corpus_rust_code_is_almost_never_refused() {
    at_most_one_in_a_thousand(rust_crates());
}

#[test]
#[ignore = "needs python3 and tests/clients/.venv (.ci/run makes it); cargo test -- --ignored"]
fn secret_corpus_python_code_is_almost_never_refused() {
    at_most_one_in_a_thousand(python_packages());
}

#[test]
#[ignore = "needs npm ci --prefix tests/clients (.ci/run does); cargo test -- --ignored"]
fn secret_corpus_npm_code_is_almost_never_refused() {
    at_most_one_in_a_thousand(npm_packages());
}

/// Scans a sample of an ecosystem: at most one chunk in a thousand
/// refused, of at least 3,000. The figures go to stderr (`cargo test
/// secret_corpus -- --nocapture` shows them), with each refused line.
fn at_most_one_in_a_thousand(ecosystem: Ecosystem) {
    let sample = sample(&ecosystem);
    let refused: Vec<String> = sample
        .chunks
        .iter()
        .filter_map(|(file, chunk)| {
            let kind = find_secret(chunk)?;
            Some(format!(
                "{}: {kind}: {}",
                file.display(),
                refused_text(chunk)
            ))
        })
        .collect();
    let chunks = sample.chunks.len();
    eprintln!(
        "{}: {} files in {} packages; {chunks} chunks of up to 8 KiB scanned, {} refused ({:.3}%)",
        ecosystem.name,
        sample.files,
        ecosystem.packages.len(),
        refused.len(),
        100.0 * refused.len() as f64 / chunks.max(1) as f64
    );
    for line in &refused {
        eprintln!("  {line}");
    }
    assert!(
        chunks >= 3_000,
        "only {chunks} chunks of {}: the figure needs 3,000",
        ecosystem.name
    );
    assert!(
        refused.len() * 1000 <= chunks,
        "{}: {} of {chunks} chunks refused:\n{}",
        ecosystem.name,
        refused.len(),
        refused.join("\n")
    );
}
