"""Drives oras-py (the ORAS project's Python client) for the interop tests.

    python oras_helper.py push REGISTRY/REPO:TAG FILE CONFIG_FILE CONFIG_MEDIA_TYPE
    python oras_helper.py push-default-config REGISTRY/REPO:TAG FILE
    python oras_helper.py pull REGISTRY/REPO:TAG OUTDIR

The registry is reached over plain HTTP (the tests run it on 127.0.0.1).
Pull prints the paths of the files it wrote, one per line.
"""

import os
import sys

import oras.client


def main(argv):
    command, target = argv[1], argv[2]
    client = oras.client.OrasClient(insecure=True)
    if command == "push":
        path, config, config_type = argv[3], argv[4], argv[5]
        # oras-py wants the files inside the working directory.
        os.chdir(os.path.dirname(path))
        client.push(
            target,
            files=[os.path.basename(path) + ":application/wasm"],
            manifest_config=config + ":" + config_type,
            quiet=True,
        )
    elif command == "push-default-config":
        path = argv[3]
        os.chdir(os.path.dirname(path))
        client.push(target, files=[os.path.basename(path) + ":application/wasm"], quiet=True)
    elif command == "pull":
        for path in client.pull(target, outdir=argv[3]):
            print(path)
    else:
        raise SystemExit("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
