// A C++ client of ALE's gRPC contract (ale.v1), generated from the same .proto files as the
// Python packages (protoc + grpc_cpp_plugin from Debian's protobuf-compiler-grpc).
//
//   ale_client --target 127.0.0.1:50051 --api-key KEY [--text S]
//   ale_client --target ... --env game:GuessTheNumber-v0 [--kwargs JSON] [--seed N]
//
// Creates a sandbox, runs `echo`, writes and reads back a file, stops and deletes the sandbox,
// and prints one JSON object with what it saw. With --env it makes an environment with the
// google.protobuf.Struct kwargs given as JSON, resets it, and prints the observation and the info
// Struct as JSON (protobuf's JSON utilities convert Struct both ways). A failed call prints the server's typed error
// (the ale.v1.ErrorDetail in the "ale-error-bin" trailer) as JSON on stderr and exits 2.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "ale_proto/v1/common.pb.h"
#include "ale_proto/v1/env.grpc.pb.h"
#include "ale_proto/v1/sandbox.grpc.pb.h"

namespace {

using ale::v1::SandboxService;

struct Options {
  std::string target = "127.0.0.1:50051";
  std::string api_key;
  std::string text = "hello from c++";
  std::string env_id;  // set: the EnvService round trip instead of the sandbox one
  std::string kwargs = "{}";
  long long seed = -1;
};

// JSON string literal (enough escaping for command output and error messages).
std::string quote(const std::string& s) {
  std::ostringstream o;
  o << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o << '\\' << c;
    else if (c == '\n') o << "\\n";
    else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); o << buf; }
    else o << c;
  }
  o << '"';
  return o.str();
}

// Every call: the API key as a bearer token, and a deadline. Exec's deadline must outlast its
// timeout_ms (the server adds its own slack; see docs/clients.md), so callers pass it.
void prepare(grpc::ClientContext& ctx, const Options& opts, std::chrono::milliseconds deadline) {
  if (!opts.api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + opts.api_key);
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
}

// The typed error travels as a serialized ale.v1.ErrorDetail in the trailing metadata
// "ale-error-bin" (binary metadata: grpc++ hands back the decoded bytes).
[[noreturn]] void fail(const char* method, const grpc::Status& status, const grpc::ClientContext& ctx) {
  ale::v1::ErrorDetail detail;
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("ale-error-bin");
  std::string code, field, message = status.error_message();
  if (it != trailers.end() && detail.ParseFromArray(it->second.data(), static_cast<int>(it->second.size()))) {
    code = ale::v1::ErrorCode_Name(detail.code());
    field = detail.field();
    message = detail.message();
  } else {
    code = "GRPC_STATUS_" + std::to_string(static_cast<int>(status.error_code()));
  }
  std::cerr << "{\"error\": {\"method\": " << quote(method) << ", \"grpc_status\": " << status.error_code()
            << ", \"code\": " << quote(code) << ", \"field\": " << quote(field)
            << ", \"message\": " << quote(message) << "}}" << std::endl;
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  if (const char* t = std::getenv("ALE_ROCK_ADDRESS")) o.target = t;
  if (const char* k = std::getenv("ALE_ROCK_API_KEY")) o.api_key = k;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--target" && i + 1 < argc) o.target = argv[++i];
    else if (a == "--api-key" && i + 1 < argc) o.api_key = argv[++i];
    else if (a == "--text" && i + 1 < argc) o.text = argv[++i];
    else if (a == "--env" && i + 1 < argc) o.env_id = argv[++i];
    else if (a == "--kwargs" && i + 1 < argc) o.kwargs = argv[++i];
    else if (a == "--seed" && i + 1 < argc) o.seed = std::stoll(argv[++i]);
    else {
      std::cerr << "usage: ale_client [--target H:P] [--api-key K] [--text S | --env ID [--kwargs JSON] [--seed N]]"
                << std::endl;
      std::exit(64);
    }
  }
  return o;
}

// Make (kwargs: JSON -> Struct), Reset, Close; prints {"observation": ..., "info": <Struct as JSON>}.
int run_env(const std::shared_ptr<grpc::Channel>& channel, const Options& opts) {
  auto env = ale::v1::EnvService::NewStub(channel);
  using std::chrono::milliseconds;
  ale::v1::MakeRequest make;
  make.set_env_id(opts.env_id);
  if (!google::protobuf::util::JsonStringToMessage(opts.kwargs, make.mutable_kwargs()).ok()) {
    std::cerr << "--kwargs must be a JSON object" << std::endl;
    return 64;
  }
  ale::v1::MakeResponse made;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(120000));
    grpc::Status s = env->Make(&ctx, make, &made);
    if (!s.ok()) fail("Make", s, ctx);
  }
  ale::v1::ResetRequest reset;
  reset.set_env_handle(made.env_handle());
  if (opts.seed >= 0) reset.set_seed(opts.seed);
  ale::v1::ResetResponse first;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(60000));
    grpc::Status s = env->Reset(&ctx, reset, &first);
    if (!s.ok()) fail("Reset", s, ctx);
  }
  ale::v1::CloseRequest close;
  close.set_env_handle(made.env_handle());
  ale::v1::CloseResponse closed;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(60000));
    grpc::Status s = env->Close(&ctx, close, &closed);
    if (!s.ok()) fail("Close", s, ctx);
  }
  std::string info;
  (void)google::protobuf::util::MessageToJsonString(first.info(), &info);
  std::cout << "{\"observation\": " << quote(first.observation()) << ", \"info\": " << info << "}" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opts = parse(argc, argv);
  grpc::ChannelArguments args;
  // Exec output and a full 4 MiB ReadFile exceed gRPC's default 4 MiB receive limit: accept what
  // the Admin sends (16 MiB; docs/clients.md).
  args.SetMaxReceiveMessageSize(16 << 20);
  auto channel = grpc::CreateCustomChannel(opts.target, grpc::InsecureChannelCredentials(), args);
  if (!opts.env_id.empty()) return run_env(channel, opts);
  auto stub = SandboxService::NewStub(channel);
  using std::chrono::milliseconds;

  ale::v1::CreateSandboxRequest create;
  create.set_wait(true);
  create.mutable_spec();  // the server's defaults (image, resources)
  ale::v1::CreateSandboxResponse created;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(120000));
    grpc::Status s = stub->CreateSandbox(&ctx, create, &created);
    if (!s.ok()) fail("CreateSandbox", s, ctx);
  }
  const std::string id = created.sandbox().id();

  ale::v1::ExecRequest exec;
  exec.set_sandbox_id(id);
  exec.mutable_spec()->add_argv("echo");
  exec.mutable_spec()->add_argv(opts.text);
  exec.mutable_spec()->set_timeout_ms(10000);
  ale::v1::ExecResponse ran;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(10000 + 30000));
    grpc::Status s = stub->Exec(&ctx, exec, &ran);
    if (!s.ok()) fail("Exec", s, ctx);
  }

  ale::v1::WriteFileRequest write;
  write.set_sandbox_id(id);
  write.set_path("/tmp/ale-cpp-note.txt");
  write.set_data(opts.text + "\n");
  ale::v1::WriteFileResponse written;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(30000));
    grpc::Status s = stub->WriteFile(&ctx, write, &written);
    if (!s.ok()) fail("WriteFile", s, ctx);
  }

  ale::v1::ReadFileRequest read;
  read.set_sandbox_id(id);
  read.set_path("/tmp/ale-cpp-note.txt");
  ale::v1::ReadFileResponse got;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(30000));
    grpc::Status s = stub->ReadFile(&ctx, read, &got);
    if (!s.ok()) fail("ReadFile", s, ctx);
  }

  ale::v1::StopSandboxRequest stop;
  stop.set_sandbox_id(id);
  ale::v1::StopSandboxResponse stopped;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(60000));
    grpc::Status s = stub->StopSandbox(&ctx, stop, &stopped);
    if (!s.ok()) fail("StopSandbox", s, ctx);
  }

  ale::v1::DeleteSandboxRequest del;
  del.set_sandbox_id(id);
  ale::v1::DeleteSandboxResponse deleted;
  {
    grpc::ClientContext ctx;
    prepare(ctx, opts, milliseconds(60000));
    grpc::Status s = stub->DeleteSandbox(&ctx, del, &deleted);
    if (!s.ok()) fail("DeleteSandbox", s, ctx);
  }

  const auto& r = ran.result();
  std::cout << "{\"id\": " << quote(id)
            << ", \"created_state\": " << quote(ale::v1::SandboxState_Name(created.sandbox().state()))
            << ", \"exit_code\": " << r.exit_code() << ", \"stdout\": " << quote(r.stdout())
            << ", \"file\": " << quote(got.data()) << ", \"file_size\": " << got.size()
            << ", \"eof\": " << (got.eof() ? "true" : "false")
            << ", \"stopped_state\": " << quote(ale::v1::SandboxState_Name(stopped.sandbox().state()))
            << "}" << std::endl;
  return 0;
}
