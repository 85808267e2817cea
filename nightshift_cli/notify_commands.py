"""nightshift notify: what Nightshift told you lately, and by which channels it tells you."""

from __future__ import annotations

import click

from .common import Context, new_table, out, pass_context, print_json

CHANNELS = ("push", "email", "webhook")


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@click.pass_context
def notify(ctx: click.Context, as_json: bool) -> None:
    """What Nightshift told you lately (notify choices, notify set: how it tells you)."""
    if ctx.invoked_subcommand is not None:
        return
    obj: Context = ctx.obj
    told = obj.client.get("/notifications/")
    if as_json:
        print_json(told)
        return
    if not told:
        out.print("Nothing yet. Choose how you are told with `nightshift notify choices`.")
        return
    table = new_table("WHEN", "WHAT", "SENT BY")
    for notification in told:
        sent = ", ".join(
            f"{delivery['channel']} {delivery['state']}" for delivery in notification["deliveries"]
        )
        table.add_row(
            notification["created_at"][:16].replace("T", " "), notification["title"], sent
        )
    out.print(table)


@notify.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@pass_context
def choices(obj: Context, as_json: bool) -> None:
    """Each event, and the channels it is told by."""
    rows = obj.client.get("/notifications/preferences/")
    if as_json:
        print_json(rows)
        return
    table = new_table("EVENT", "WHEN", *(channel.upper() for channel in CHANNELS))
    for row in rows:
        marks = ["yes" if channel in row["channels"] else "-" for channel in CHANNELS]
        table.add_row(row["event"], row["label"], *marks)
    out.print(table)


@notify.command("set")
@click.argument("event")
@click.argument("channels")
@pass_context
def set_channels(obj: Context, event: str, channels: str) -> None:
    """Tell EVENT by CHANNELS: a comma-separated list of push, email and webhook, or none.

    nightshift notify set job.ended email,push"""
    chosen = [] if channels.strip() == "none" else [c.strip() for c in channels.split(",") if c]
    rows = obj.client.put("/notifications/preferences/", {"preferences": {event: chosen}})
    [row] = [row for row in rows if row["event"] == event]
    out.print(f"{row['label']}: {', '.join(row['channels']) or 'not told'}.")
