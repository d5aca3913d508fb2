//! The JSON-RPC method table, read at run time from the `snowpea.rpc.v1` custom options
//! of the embedded descriptor set (DESIGN.md §3). The gateway routes with it and
//! `gen-protocol` documents from it, so a method is declared exactly once: in proto.

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, OnceLock};

use prost_reflect::{
    DescriptorPool, EnumValueDescriptor, ExtensionDescriptor, FieldDescriptor, MessageDescriptor,
    MethodDescriptor, Value,
};

use crate::descriptor_pool;

/// How a JSON-RPC method travels (option `snowpea.rpc.v1.direction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// A request the client sends and the daemon answers.
    ClientToServer,
    /// A request the daemon sends to one client (approval.request, …).
    ServerToClient,
    /// A notification the client sends (tool.progress).
    ClientNotification,
}

impl Direction {
    /// The arrow text the spec's method index uses.
    pub fn arrow(self) -> &'static str {
        match self {
            Direction::ClientToServer | Direction::ClientNotification => "client → server",
            Direction::ServerToClient => "server → client",
        }
    }
}

/// One JSON-RPC method of the protocol.
#[derive(Debug, Clone)]
pub struct MethodSpec {
    /// JSON-RPC name, e.g. `session.create`.
    pub name: String,
    /// Direction of the call.
    pub direction: Direction,
    /// Protocol version that introduced it, when declared.
    pub since: Option<String>,
    /// Owning service: the proto package's middle segment (`session`, `memory`,
    /// `scheduler`, `mcp`, `audio`, `system`). `system` is answered by the gateway.
    pub owner: String,
    /// gRPC path, e.g. `/snowpea.session.v1.SessionService/Create`.
    pub grpc_path: String,
    /// The rpc descriptor.
    pub method: MethodDescriptor,
}

impl MethodSpec {
    /// Leading comment of the rpc: the spec's description (read from
    /// [`crate::documented_pool`] on first use).
    pub fn description(&self) -> String {
        schema().comment_of(self.method.parent_file().name(), self.method.path())
    }

    /// Params message.
    pub fn input(&self) -> MessageDescriptor {
        self.method.input()
    }
    /// Result message.
    pub fn output(&self) -> MessageDescriptor {
        self.method.output()
    }
}

/// A protocol error code (enum `snowpea.rpc.v1.ErrorCode` value).
#[derive(Debug, Clone)]
pub struct ErrorCodeSpec {
    /// Wire string, e.g. `not_found`.
    pub wire: String,
    /// Numeric JSON-RPC `error.code`.
    pub jsonrpc_code: i32,
    /// The enum value's file and descriptor path (where its comment is).
    at: (String, Vec<i32>),
}

impl ErrorCodeSpec {
    /// Meaning (leading comment of the enum value, read from [`crate::documented_pool`] on
    /// first use).
    pub fn description(&self) -> String {
        schema().comment_of(&self.at.0, &self.at.1)
    }
}

/// How the description of a capability the daemon never advertises starts (issue 32 item 8:
/// docs/protocol.md lists it with the reason; a suite test compares `system.hello` with the
/// rest).
pub const NOT_ADVERTISED: &str = "Not advertised:";

/// The proto comments by (file, descriptor path): cleaned ([`clean`]) and as written.
#[derive(Debug, Default)]
struct Comments {
    cleaned: HashMap<(String, Vec<i32>), String>,
    raw: HashMap<(String, Vec<i32>), String>,
}

impl Comments {
    fn load(pool: &DescriptorPool) -> Comments {
        let mut c = Comments::default();
        for file in pool.files() {
            if let Some(info) = &file.file_descriptor_proto().source_code_info {
                for loc in &info.location {
                    if let Some(text) = &loc.leading_comments {
                        let key = (file.name().to_owned(), loc.path.clone());
                        c.cleaned.insert(key.clone(), clean(text));
                        c.raw.insert(key, text.clone());
                    }
                }
            }
        }
        c
    }
}

/// The whole protocol as declared in proto.
#[derive(Debug)]
pub struct Schema {
    /// Methods by JSON-RPC name.
    pub methods: BTreeMap<String, MethodSpec>,
    /// Server→client notifications by name → params message.
    pub notifications: BTreeMap<String, MessageDescriptor>,
    /// `session.event` kinds → payload message.
    pub event_kinds: BTreeMap<String, MessageDescriptor>,
    /// Error codes in declaration order.
    pub error_codes: Vec<ErrorCodeSpec>,
    /// Capability names declared by `snowpea.system.v1.Capability` (empty if absent).
    pub capabilities: Vec<String>,
    /// Each capability's enum value (file, descriptor path), where its comment is.
    capability_at: Vec<(String, Vec<i32>)>,
    /// The proto comments, loaded from [`crate::documented_pool`] the first time a
    /// description is asked for (only the documentation generators do), so a running
    /// process never holds them. The raw ones keep the machine notes (`spec type:`,
    /// `int64:`) that [`clean`] drops; [`Schema::spec_type_of`] reads them.
    comments: OnceLock<Comments>,
}

/// Names of the custom options (extensions) in `snowpea/rpc/v1/options.proto`.
pub mod opt {
    /// Method: JSON-RPC name.
    pub const JSON_METHOD: &str = "snowpea.rpc.v1.json_method";
    /// Method: direction.
    pub const DIRECTION: &str = "snowpea.rpc.v1.direction";
    /// Method: since version.
    pub const SINCE: &str = "snowpea.rpc.v1.since";
    /// Field: required.
    pub const REQUIRED: &str = "snowpea.rpc.v1.required";
    /// Field: allowed string values.
    pub const VALUES: &str = "snowpea.rpc.v1.values";
    /// Field: since version.
    pub const FIELD_SINCE: &str = "snowpea.rpc.v1.field_since";
    /// Field: `T | null`.
    pub const NULLABLE: &str = "snowpea.rpc.v1.nullable";
    /// Field: sent on the wire but not in the spec's tables (left out of the docs).
    pub const WIRE_ONLY: &str = "snowpea.rpc.v1.wire_only";
    /// Field: allowed string values named once, as the wire spellings of an enum.
    pub const VALUE_SET: &str = "snowpea.rpc.v1.value_set";
    /// Field: free-form JSON object carried as its text.
    pub const JSON_OBJECT: &str = "snowpea.rpc.v1.json_object";
    /// Field: the spec's table leaves its description empty (docs/protocol.md does too).
    pub const SPEC_UNDESCRIBED: &str = "snowpea.rpc.v1.spec_undescribed";
    /// Field: how a notification/event writes it when it holds no value.
    pub const UNSET: &str = "snowpea.rpc.v1.unset";
    /// Message: notification name.
    pub const NOTIFICATION: &str = "snowpea.rpc.v1.notification";
    /// Message: session.event kind.
    pub const EVENT_KIND: &str = "snowpea.rpc.v1.event_kind";
    /// Message: since version.
    pub const MESSAGE_SINCE: &str = "snowpea.rpc.v1.message_since";
    /// Enum value: wire spelling.
    pub const WIRE: &str = "snowpea.rpc.v1.wire";
    /// Enum value: JSON-RPC numeric code.
    pub const JSONRPC_CODE: &str = "snowpea.rpc.v1.jsonrpc_code";
}

fn ext(pool: &DescriptorPool, name: &str) -> ExtensionDescriptor {
    pool.get_extension_by_name(name)
        .unwrap_or_else(|| panic!("extension {name} declared in options.proto"))
}

fn opt_string(
    options: &prost_reflect::DynamicMessage,
    ext: &ExtensionDescriptor,
) -> Option<String> {
    if !options.has_extension(ext) {
        return None;
    }
    match &*options.get_extension(ext) {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// Field-level options of the protocol.
#[derive(Debug, Clone, Default)]
pub struct FieldRules {
    /// Must be present.
    pub required: bool,
    /// Allowed string values (empty: any).
    pub values: Vec<String>,
    /// `T | null` in the spec.
    pub nullable: bool,
    /// Version that introduced the field.
    pub since: Option<String>,
    /// Sent on the wire but not in the spec's tables (option `wire_only`).
    pub wire_only: bool,
    /// Full name of the enum whose `wire` spellings are [`FieldRules::values`] (option
    /// `value_set`, e.g. `snowpea.session.v1.PermissionMode`), when the list is a named one.
    pub value_set: Option<String>,
    /// A free-form JSON object (`Record<string, unknown>`) carried as its text on a `string`
    /// field (option `json_object`), so its numbers round-trip exactly; empty text is unset.
    pub json_object: bool,
    /// The spec's table leaves the field's description empty (option `spec_undescribed`):
    /// `docs/protocol.md` prints it empty, the JSON Schema and the SDK carry its comment.
    pub spec_undescribed: bool,
}

/// Reads the protocol options of a field.
pub fn field_rules(field: &FieldDescriptor) -> FieldRules {
    static EXTS: LazyLock<[ExtensionDescriptor; 8]> = LazyLock::new(|| {
        let p = descriptor_pool();
        [
            ext(p, opt::REQUIRED),
            ext(p, opt::VALUES),
            ext(p, opt::NULLABLE),
            ext(p, opt::FIELD_SINCE),
            ext(p, opt::WIRE_ONLY),
            ext(p, opt::VALUE_SET),
            ext(p, opt::JSON_OBJECT),
            ext(p, opt::SPEC_UNDESCRIBED),
        ]
    });
    let options = field.options();
    let mut rules = FieldRules::default();
    if options.has_extension(&EXTS[0]) {
        rules.required = options.get_extension(&EXTS[0]).as_bool().unwrap_or(false);
    }
    if options.has_extension(&EXTS[1]) {
        if let Some(list) = options.get_extension(&EXTS[1]).as_list() {
            rules.values = list
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
        }
    }
    if let Some(set) = opt_string(&options, &EXTS[5]) {
        rules.values = value_set(&set);
        rules.value_set = Some(set);
    }
    if options.has_extension(&EXTS[2]) {
        rules.nullable = options.get_extension(&EXTS[2]).as_bool().unwrap_or(false);
    }
    rules.nullable |= field.field_descriptor_proto().proto3_optional();
    rules.since = opt_string(&options, &EXTS[3]);
    if options.has_extension(&EXTS[4]) {
        rules.wire_only = options.get_extension(&EXTS[4]).as_bool().unwrap_or(false);
    }
    if options.has_extension(&EXTS[6]) {
        rules.json_object = options.get_extension(&EXTS[6]).as_bool().unwrap_or(false);
    }
    if options.has_extension(&EXTS[7]) {
        rules.spec_undescribed = options.get_extension(&EXTS[7]).as_bool().unwrap_or(false);
    }
    rules
}

/// Whether `field` is a `json_object` field (see [`FieldRules::json_object`]), answered from a
/// set built once: the JSON writers ask it for every field they write, and reading a field's
/// options decodes them each time.
pub fn is_json_object(field: &FieldDescriptor) -> bool {
    static FIELDS: LazyLock<std::collections::HashSet<String>> = LazyLock::new(|| {
        descriptor_pool()
            .all_messages()
            .flat_map(|m| m.fields().collect::<Vec<_>>())
            .filter(|f| field_rules(f).json_object)
            .map(|f| f.full_name().to_owned())
            .collect()
    });
    field.kind() == prost_reflect::Kind::String && FIELDS.contains(field.full_name())
}

/// The `wire` spellings of the values of the enum a `value_set` option names, in declaration
/// order (values without `wire`, like the `*_UNSPECIFIED` zero, are not protocol values). Empty
/// when the pool has no such enum; the `every_value_set_names_an_enum` test rules that out.
pub fn value_set(name: &str) -> Vec<String> {
    let pool = descriptor_pool();
    let wire = ext(pool, opt::WIRE);
    pool.get_enum_by_name(name)
        .map(|e| e.values().filter_map(|v| enum_wire(&v, &wire)).collect())
        .unwrap_or_default()
}

fn enum_wire(value: &EnumValueDescriptor, wire: &ExtensionDescriptor) -> Option<String> {
    opt_string(&value.options(), wire)
}

/// The `wire` option of an enum value (error codes, capabilities), when it has one.
pub fn enum_wire_of(value: &EnumValueDescriptor) -> Option<String> {
    static WIRE: LazyLock<ExtensionDescriptor> =
        LazyLock::new(|| ext(descriptor_pool(), opt::WIRE));
    enum_wire(value, &WIRE)
}

impl Schema {
    fn load(pool: &DescriptorPool) -> Schema {
        let json_method = ext(pool, opt::JSON_METHOD);
        let direction = ext(pool, opt::DIRECTION);
        let since = ext(pool, opt::SINCE);
        let notification = ext(pool, opt::NOTIFICATION);
        let event_kind = ext(pool, opt::EVENT_KIND);
        let wire = ext(pool, opt::WIRE);
        let jsonrpc_code = ext(pool, opt::JSONRPC_CODE);

        let mut schema = Schema {
            methods: BTreeMap::new(),
            notifications: BTreeMap::new(),
            event_kinds: BTreeMap::new(),
            error_codes: Vec::new(),
            capabilities: Vec::new(),
            capability_at: Vec::new(),
            comments: OnceLock::new(),
        };

        for service in pool.services() {
            let package = service.package_name().to_owned();
            let owner = package
                .strip_prefix("snowpea.")
                .and_then(|p| p.split('.').next())
                .unwrap_or_default()
                .to_owned();
            for method in service.methods() {
                let options = method.options();
                let Some(name) = opt_string(&options, &json_method) else {
                    continue;
                };
                let dir = match options.get_extension(&direction).as_enum_number() {
                    Some(2) => Direction::ServerToClient,
                    Some(3) => Direction::ClientNotification,
                    _ => Direction::ClientToServer,
                };
                schema.methods.insert(
                    name.clone(),
                    MethodSpec {
                        name,
                        direction: dir,
                        since: opt_string(&options, &since),
                        owner: owner.clone(),
                        grpc_path: format!("/{}/{}", service.full_name(), method.name()),
                        method,
                    },
                );
            }
        }
        for message in pool.all_messages() {
            let options = message.options();
            if let Some(n) = opt_string(&options, &notification) {
                schema.notifications.insert(n, message.clone());
            }
            if let Some(k) = opt_string(&options, &event_kind) {
                schema.event_kinds.insert(k, message.clone());
            }
        }
        if let Some(codes) = pool.get_enum_by_name("snowpea.rpc.v1.ErrorCode") {
            for value in codes.values() {
                let Some(w) = enum_wire(&value, &wire) else {
                    continue;
                };
                let o = value.options();
                let code = o.get_extension(&jsonrpc_code).as_i32().unwrap_or(-32000);
                schema.error_codes.push(ErrorCodeSpec {
                    wire: w,
                    jsonrpc_code: code,
                    at: (value.parent_file().name().to_owned(), value.path().to_vec()),
                });
            }
        }
        if let Some(caps) = pool.get_enum_by_name("snowpea.system.v1.Capability") {
            for value in caps.values() {
                if let Some(w) = enum_wire(&value, &wire) {
                    schema.capabilities.push(w);
                    schema
                        .capability_at
                        .push((value.parent_file().name().to_owned(), value.path().to_vec()));
                }
            }
        }
        schema
    }

    /// What capability `name` means in this daemon (the leading comment of its
    /// `snowpea.system.v1.Capability` value, read from [`crate::documented_pool`] on first
    /// use); one never advertised starts with [`NOT_ADVERTISED`]. "" for an unknown name.
    pub fn capability_description(&self, name: &str) -> String {
        self.capabilities
            .iter()
            .position(|c| c == name)
            .map(|i| {
                let (file, path) = &self.capability_at[i];
                self.comment_of(file, path)
            })
            .unwrap_or_default()
    }

    /// Leading comment at a descriptor path of a file ("" when none).
    pub fn comment_of(&self, file: &str, path: &[i32]) -> String {
        self.comments()
            .cleaned
            .get(&(file.to_owned(), path.to_vec()))
            .cloned()
            .unwrap_or_default()
    }

    /// Leading comment of a message.
    pub fn message_doc(&self, m: &MessageDescriptor) -> String {
        self.comment_of(m.parent_file().name(), m.path())
    }

    /// Leading comment of a field.
    pub fn field_doc(&self, f: &FieldDescriptor) -> String {
        self.comment_of(f.parent_file().name(), f.path())
    }

    /// The spec's TypeScript type of a Struct/Value/map field, verbatim from its
    /// `// spec type: <TS type>` comment line (e.g. `Record<string, string> | null`), when the
    /// field carries one. `gen-protocol` prints it instead of deriving a type.
    pub fn spec_type_of(&self, f: &FieldDescriptor) -> Option<String> {
        let raw = self
            .comments()
            .raw
            .get(&(f.parent_file().name().to_owned(), f.path().to_vec()))?;
        raw.lines()
            .find_map(|l| l.trim().strip_prefix("spec type:"))
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
    }

    fn comments(&self) -> &Comments {
        self.comments
            .get_or_init(|| Comments::load(crate::documented_pool()))
    }

    /// Looks up a method by JSON-RPC name.
    pub fn method(&self, name: &str) -> Option<&MethodSpec> {
        self.methods.get(name)
    }

    /// The error code spec for a wire string.
    pub fn error_code(&self, wire: &str) -> Option<&ErrorCodeSpec> {
        self.error_codes.iter().find(|c| c.wire == wire)
    }
}

/// Joins a proto comment's lines into one paragraph text (keeps blank-line breaks).
fn clean(comment: &str) -> String {
    let mut out = String::new();
    for line in comment.lines() {
        let line = line.trim();
        // Machine notes spec2proto left for tools, not part of the description.
        if line.starts_with("int64:")
            || line.starts_with("spec type:")
            || line.starts_with("object items have the shape of ")
            || line.starts_with("object form has the shape of ")
        {
            continue;
        }
        if line.is_empty() {
            if !out.ends_with("\n\n") && !out.is_empty() {
                out.push_str("\n\n");
            }
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push(' ');
        }
        out.push_str(line);
    }
    out.trim().to_owned()
}

/// The schema of the embedded descriptor set (loaded once).
pub fn schema() -> &'static Schema {
    static SCHEMA: LazyLock<Schema> = LazyLock::new(|| Schema::load(descriptor_pool()));
    &SCHEMA
}
