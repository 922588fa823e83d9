"""A TCP forwarder on 127.0.0.1 for the database fault tests: start it and the database "comes up", kill it and the
database "goes away" (every connection through it drops).

    python tcp_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT

Prints "listening" once it accepts connections; exits when its standard input closes (the test runner's children
inherit a blocked SIGTERM, so tests stop it with SIGKILL or by closing stdin).
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main():
    listen_port, target_host, target_port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port, reuse_address=True)
    print("listening", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until stdin closes
    server.close()


asyncio.run(main())
