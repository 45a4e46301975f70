# An at-run handler: a module-level function taking (input, context). Its return value is the output.
def greet(input, context):
    name = (input or {}).get("name", "world")
    context.log(f"greeting {name}")
    return {"greeting": f"Hello, {name}!", "language": "python", "caller": context.caller_did}
