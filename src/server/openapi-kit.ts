/** The builders every part of the OpenAPI document uses (openapi.ts and its route-family files). */

export const json = (schema: object) => ({ content: { "application/json": { schema } } });
export const anyObject = { type: "object", additionalProperties: true };
/** A success response: `schema`, or any JSON object. */
export const ok = (description: string, schema: object = anyObject, status = "200") => ({
  [status]: { description, ...json(schema) },
});
export const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }]));
export const query = (name: string, schema: object, description: string) => ({
  name,
  in: "query",
  schema,
  description,
});
/** A 200 response that is a Server-Sent Events stream. */
export const eventStream = {
  "200": { description: "An event stream", content: { "text/event-stream": { schema: { type: "string" } } } },
};
