-- What a refresh token is for: a dashboard session (`dashboard`, exchanged
-- at /api/v1/auth/refresh), or the OAuth authorization pages' sign-in
-- (`oauth_sign_in`, good for those pages only, never for an access token).
ALTER TABLE refresh_tokens ADD COLUMN purpose TEXT NOT NULL DEFAULT 'dashboard';
